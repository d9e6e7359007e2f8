#!/bin/sh
# fetch_data: gather the day's raw sales files into one CSV (one header, rows in file order).
#   prepare  remove leftovers of an earlier, interrupted attempt
#   (none)   write $DATA_DIR/work/fetched.csv
#   cleanup  remove the temporary file, whatever happened
# The output is written to a temporary name and renamed, so it is never seen half-written.
set -eu
: "${DATA_DIR:?DATA_DIR must name the data folder}"
work="$DATA_DIR/work"
tmp="$work/fetched.csv.tmp"

case "${1:-execute}" in
prepare)
    mkdir -p "$work"
    rm -f "$tmp"
    ;;
execute)
    set -- "$DATA_DIR"/raw/*.csv
    if [ ! -e "$1" ]; then
        echo "fetch_data: no input files in $DATA_DIR/raw" >&2
        exit 1
    fi
    # Keep the first file's header, drop the others'.
    awk 'FNR == 1 && NR != 1 { next } { sub(/\r$/, ""); print }' "$@" > "$tmp"
    mv "$tmp" "$work/fetched.csv"
    echo "fetch_data: $(($(wc -l < "$work/fetched.csv") - 1)) rows from $# files"
    ;;
cleanup)
    rm -f "$tmp"
    ;;
*)
    echo "usage: $0 [prepare|cleanup]" >&2
    exit 2
    ;;
esac
