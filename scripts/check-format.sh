#!/usr/bin/env bash
# Checks that the C sources follow .clang-format (docs/style.md).
#
#   scripts/check-format.sh          list the files clang-format would change;
#                                    exit 1 if any, 0 on a clean tree
#   scripts/check-format.sh --fix    rewrite those files in place
#
# The file set is git's: every tracked or new (untracked, not ignored) .c/.h
# under src/, tools/, t/unit/ and fuzz/, so a new file is checked without an
# edit here. Skipped: build*/, tools/npm/, and any file whose first lines say
# it is generated ("generated ... do not edit").
set -euo pipefail

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

fix=0
case "${1:-}" in
--fix) fix=1 ;;
"") ;;
-h | --help)
	sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "usage: $0 [--fix]" >&2
	exit 2
	;;
esac

if ! command -v "$CLANG_FORMAT" >/dev/null; then
	echo "check-format: $CLANG_FORMAT not found (scripts/install-deps.sh installs it)" >&2
	exit 2
fi
case "$("$CLANG_FORMAT" --version)" in
*"version 14."*) ;;
*) echo "check-format: warning: .clang-format is tuned for clang-format 14;" \
	"$("$CLANG_FORMAT" --version) may format differently" >&2 ;;
esac

files=()
while IFS= read -r -d '' f; do
	case "$f" in
	build*/* | tools/npm/*) continue ;;
	esac
	[ -f "$f" ] || continue # deleted in the work tree, not yet in the index
	if head -n 5 "$f" | grep -qiE 'generated.*do not edit|@generated'; then
		continue
	fi
	files+=("$f")
done < <(git ls-files -z --cached --others --exclude-standard -- \
	'src/*.c' 'src/*.h' 'tools/*.c' 't/unit/*.c' 'fuzz/*.c' | sort -zu)

if [ ${#files[@]} -eq 0 ]; then
	echo "check-format: no files to check" >&2
	exit 0
fi

if [ $fix -eq 1 ]; then
	"$CLANG_FORMAT" --style=file -i "${files[@]}"
	echo "check-format: formatted ${#files[@]} files in place"
	exit 0
fi

bad=()
for f in "${files[@]}"; do
	if ! "$CLANG_FORMAT" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
		bad+=("$f")
	fi
done

if [ ${#bad[@]} -eq 0 ]; then
	exit 0
fi
echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:" >&2
for f in "${bad[@]}"; do
	n=$("$CLANG_FORMAT" --style=file "$f" | diff "$f" - | grep -c '^[<>]' || true)
	echo "  $f ($n lines)" >&2
done
echo "See the changes: $CLANG_FORMAT --style=file FILE | diff -u FILE -" >&2
echo "Fix them:        scripts/check-format.sh --fix   (see docs/style.md)" >&2
exit 1
