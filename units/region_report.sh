#!/bin/sh
# region_report REGION: the clean rows of one region, by product, into
# $DATA_DIR/out/region-REGION.csv (a header only when the region sold nothing).
# One instance of the fan-out `region_report` runs per region (`foreach: ${params.regions}`).
set -eu
: "${DATA_DIR:?DATA_DIR must name the data folder}"
region="${1:?usage: $0 REGION}"
out="$DATA_DIR/out"
tmp="$out/region-$region.csv.tmp"
mkdir -p "$out"
{
    echo "product,rows,total"
    awk -F, -v region="$region" 'NR > 1 && $2 == region { rows[$3]++; total[$3] += $4 }
             END { for (p in rows) printf "%s,%d,%.2f\n", p, rows[p], total[p] }' \
        "$DATA_DIR/work/clean.csv" | LC_ALL=C sort
} > "$tmp"
mv "$tmp" "$out/region-$region.csv"
echo "region_report: $region: $(($(wc -l < "$out/region-$region.csv") - 1)) products"
