// Op-table rows of the vision / audio encoder ops (Note [op table families]).
#include "kernels/op_rows.h"

namespace standin::kernels::rows {

void append_encoder_rows(std::vector<OpRow> & rows) { (void) rows; }

} // namespace standin::kernels::rows
