# meson install puts the library, its headers and chorus.pc where a framework
# finds them: a C program and a C++ one build against `pkg-config --cflags
# --libs chorus` alone and run under chorusrun.
# Usage: pkgconfig.sh BUILD_DIR SOURCE_DIR CHORUSRUN
set -uo pipefail
build=$1 source=$2 chorusrun=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --no-rebuild --destdir "$dest" >"$dest/install.log" 2>&1 ||
  { cat "$dest/install.log"; fail "meson install failed"; }
pc=$(find "$dest" -name chorus.pc | head -1)
[ -n "$pc" ] || fail "no chorus.pc installed"
prefix=$(sed -n 's/^prefix=//p' "$pc")
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --define-variable=prefix="$dest$prefix" --cflags --libs chorus) ||
  fail "pkg-config does not know chorus"
echo "pkg-config --cflags --libs chorus: $flags"
# A sanitized build's library needs programs built with the same sanitizers.
sanitize=$(meson introspect --buildoptions "$build" | python3 -c '
import json, sys
v = [o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"][0]
v = ",".join(v) if isinstance(v, list) else v
print("" if v in ("none", "") else "-fsanitize=" + v)')
cc -std=c11 $sanitize -o "$dest/allreduce_c" "$source/examples/allreduce.c" $flags ||
  fail "the C example did not build"
c++ -std=c++20 $sanitize -o "$dest/allreduce_cpp" "$source/examples/allreduce.cpp" $flags ||
  fail "the C++ example did not build"
libdir=$(pkg-config --define-variable=prefix="$dest$prefix" --variable=libdir chorus)
out=$(LD_LIBRARY_PATH="$libdir" timeout 60 "$chorusrun" -np 2 "$dest/allreduce_c" 1000) ||
  fail "the C example failed: $out"
[ "$(grep -c ': 0 wrong' <<<"$out")" = 2 ] || fail "wrong results: $out"
# It really ran the installed library. (ldd's output is read whole first: with
# pipefail, `ldd | grep -q` fails whenever grep exits before ldd has written
# its last line and ldd dies of SIGPIPE.)
linked=$(LD_LIBRARY_PATH="$libdir" ldd "$dest/allreduce_c") || fail "ldd failed: $linked"
grep -q "$libdir/libchorus.so" <<<"$linked" || fail "not linked to the installed library: $linked"
out=$(LD_LIBRARY_PATH="$libdir" timeout 60 "$chorusrun" -np 2 "$dest/allreduce_cpp") ||
  fail "the C++ example failed: $out"
[ "$(grep -c 'C++ API: 0 wrong' <<<"$out")" = 2 ] || fail "wrong results: $out"
echo PASS
