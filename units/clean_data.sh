#!/bin/sh
# clean_data: normalise and filter the fetched rows.
#   Trims spaces, lower-cases region and product, drops blank rows, rows whose amount is not
#   a non-negative number, and exact duplicates. Writes $DATA_DIR/work/clean.csv.
#   prepare / cleanup remove the temporary file of an interrupted attempt.
#   CLEAN_DELAY=N (seconds, default 0) makes it slow, for the README's crash-and-resume tour.
set -eu
: "${DATA_DIR:?DATA_DIR must name the data folder}"
work="$DATA_DIR/work"
tmp="$work/clean.csv.tmp"

case "${1:-execute}" in
prepare | cleanup)
    rm -f "$tmp"
    ;;
execute)
    sleep "${CLEAN_DELAY:-0}"
    {
        echo "date,region,product,amount"
        awk -F, '
            NR == 1 { next }
            {
                for (i = 1; i <= NF; i++) gsub(/^[ \t]+|[ \t]+$/, "", $i)
                if (NF != 4 || $0 ~ /^,*$/) { dropped++; next }
                if ($4 !~ /^[0-9]+(\.[0-9]+)?$/) { dropped++; next }
                printf "%s,%s,%s,%.2f\n", $1, tolower($2), tolower($3), $4
            }
            END { printf "clean_data: dropped %d bad rows\n", dropped > "/dev/stderr" }
        ' "$work/fetched.csv" | LC_ALL=C sort -u
    } > "$tmp"
    mv "$tmp" "$work/clean.csv"
    echo "clean_data: $(($(wc -l < "$work/clean.csv") - 1)) clean rows"
    ;;
*)
    echo "usage: $0 [prepare|cleanup]" >&2
    exit 2
    ;;
esac
