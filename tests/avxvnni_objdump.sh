#!/usr/bin/env bash
# Usage: avxvnni_objdump.sh "OBJ;OBJ;...": the objects of the kernels and the
# runtime (CMake's list). Disassembles each: the AVX-VNNI kernel file's object
# must hold "{vex} vpdpbusd" (the real-op kernels are compiled), every other
# object none. Skips (exit 0, with a message) without objdump.
set -u
command -v objdump >/dev/null || { echo "SKIPPED: objdump is not installed (Debian: binutils)"; exit 0; }
IFS=';' read -r -a objects <<<"$1"
vex_file=vec_dot_avxvnni_vex.cc.o
found_vex_object=0
failures=0
for o in "${objects[@]}"; do
  [[ -n $o ]] || continue
  if [[ ! -f $o ]]; then
    echo "FAIL: object $o is missing (build the library first)"
    failures=$((failures + 1))
    continue
  fi
  if ! listing=$(objdump -d --no-show-raw-insn "$o" 2>&1); then
    echo "FAIL: objdump could not read $o: $listing"
    failures=$((failures + 1))
    continue
  fi
  count=$(grep -c '{vex} vpdpbusd' <<<"$listing")
  if [[ $(basename "$o") == "$vex_file" ]]; then
    found_vex_object=1
    if ((count == 0)); then
      echo "FAIL: $o holds no {vex} vpdpbusd: the AVX-VNNI kernels were not compiled with the instruction"
      failures=$((failures + 1))
    else
      echo "ok: $count {vex} vpdpbusd in $(basename "$o")"
    fi
  elif ((count != 0)); then
    echo "FAIL: $o holds $count {vex} vpdpbusd: only $vex_file may use AVX-VNNI"
    failures=$((failures + 1))
  fi
done
if ((found_vex_object == 0)); then
  echo "FAIL: no $vex_file among the ${#objects[@]} objects given"
  failures=$((failures + 1))
fi
echo "${#objects[@]} objects checked, $failures failures"
((failures == 0))
