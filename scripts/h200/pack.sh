#!/usr/bin/env bash
# On an H200 machine: pack every file of folder $1 into tar files of at most 15 MiB each in $2 (a device call
# brings back 8 files of 16 MiB at most): part-1.tar, part-2.tar, ... Unpack with `tar xf` here.
set -uo pipefail
src=$1 dest=$2 part=1 size=0 files=()
flush() { [ ${#files[@]} -gt 0 ] && tar cf "$dest/part-$part.tar" -C "$src" "${files[@]}" && part=$((part + 1)); files=() size=0; }
for path in "$src"/*; do
  bytes=$(stat -c %s "$path")
  [ $((size + bytes)) -gt $((15 * 1024 * 1024)) ] && flush
  files+=("$(basename "$path")") size=$((size + bytes))
done
flush
ls -la "$dest"
