#!/bin/sh
# fetch_data: gather the raw sales files into one CSV (one header, rows in file order).
#   prepare  remove leftovers of an earlier, interrupted attempt
#   [DATE]   write $DATA_DIR/work/fetched.csv from sales-*.csv up to DATE (YYYY-MM-DD; all
#            files when not given)
#   cleanup  remove the temporary file, whatever happened
# The output is written to a temporary name and renamed, so it is never seen half-written.
set -eu
: "${DATA_DIR:?DATA_DIR must name the data folder}"
work="$DATA_DIR/work"
tmp="$work/fetched.csv.tmp"

case "${1:-execute}" in
[0-9]*)
    until="$1"
    set -- execute
    ;;
esac

case "${1:-execute}" in
prepare)
    mkdir -p "$work"
    rm -f "$tmp"
    ;;
execute)
    set --
    for file in "$DATA_DIR"/raw/sales-*.csv; do
        [ -e "$file" ] || continue
        day=$(basename "$file" .csv)
        day=${day#sales-}
        # Dates as YYYY-MM-DD compare as strings.
        if [ -z "${until:-}" ] || ! expr "$day" \> "$until" > /dev/null; then
            set -- "$@" "$file"
        fi
    done
    if [ "$#" -eq 0 ]; then
        echo "fetch_data: no input files in $DATA_DIR/raw up to ${until:-any date}" >&2
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
