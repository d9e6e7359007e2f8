#!/bin/sh
# save_result: total the clean rows per region into $DATA_DIR/out/summary.csv and print it.
#   prepare / cleanup remove the temporary file of an interrupted attempt.
set -eu
: "${DATA_DIR:?DATA_DIR must name the data folder}"
out="$DATA_DIR/out"
tmp="$out/summary.csv.tmp"

case "${1:-execute}" in
prepare | cleanup)
    mkdir -p "$out"
    rm -f "$tmp"
    ;;
execute)
    {
        echo "region,rows,total"
        awk -F, 'NR > 1 { rows[$2]++; total[$2] += $4 }
                 END { for (r in rows) printf "%s,%d,%.2f\n", r, rows[r], total[r] }' \
            "$DATA_DIR/work/clean.csv" | LC_ALL=C sort
    } > "$tmp"
    mv "$tmp" "$out/summary.csv"
    cat "$out/summary.csv"
    ;;
*)
    echo "usage: $0 [prepare|cleanup]" >&2
    exit 2
    ;;
esac
