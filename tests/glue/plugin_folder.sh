#!/usr/bin/env bash
# The plugin in other applications' folders (Note [ggml-base binding],
# glue/base_link.h), run by tests/glue/plugin_host.cpp with no library path:
#   foreign HOST PREBUILT PLUGIN WORK   the plugin copied alone into WORK, loaded
#                                       by npm's prebuilt libggml from PREBUILT
#   scan    HOST PREBUILT PLUGIN WORK   an application folder: npm's prebuilt
#                                       libraries with the plugin dropped in as
#                                       libggml-cpu-standin.so, loaded by ggml's
#                                       scoring loader
set -euo pipefail
mode=$1 host=$2 prebuilt=$3 plugin=$4 work=$5
unset LD_LIBRARY_PATH LD_PRELOAD GGML_BACKEND_PATH GGML_STANDIN_REAL
rm -rf "$work" && mkdir -p "$work"
libggml=$(ls "$prebuilt"/libggml.*so | head -1)
case $mode in
    foreign)
        cp "$plugin" "$work/libggml-standin.so"
        exec "$host" foreign "$libggml" "$work/libggml-standin.so" ;;
    scan)
        # Hard links where the file system allows (the folder is 30 MB).
        cp -l "$prebuilt"/*.so "$work/" 2>/dev/null || cp "$prebuilt"/*.so "$work/"
        cp "$plugin" "$work/libggml-cpu-standin.so"
        # Replace mode: the device keeps the real library's name.
        exec "$host" scan "$work/$(basename "$libggml")" "$work" "${SCAN_DEVICE:-CPU}" ;;
    *) echo "usage: plugin_folder.sh foreign|scan HOST PREBUILT PLUGIN WORK" >&2; exit 2 ;;
esac
