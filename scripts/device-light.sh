#!/usr/bin/env bash
# The working tree a device call carries holds 64 MiB (tracked and untracked-not-ignored files, and `carry`);
# the fixtures' compressed captures fill most of it, and no device run reads them. `on` takes them out of what
# travels: untracked in the index (the files stay) and ignored in .git/info/exclude; `off` puts both back.
# Run `on` just before device calls and `off` after them; never commit while it is on.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
exclude=$(git rev-parse --git-path info/exclude)
line='/fixtures/**/*.sqlite.xz'
case ${1:-} in
  on)
    grep -qxF "$line" "$exclude" 2>/dev/null || echo "$line" >> "$exclude"
    git ls-files -z -- 'fixtures/*.sqlite.xz' | xargs -0 -r git rm -q --cached --
    echo "device-light on: $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes tracked" ;;
  off)
    grep -vxF "$line" "$exclude" > "$exclude.tmp" || true
    mv "$exclude.tmp" "$exclude"
    git reset -q -- fixtures
    echo "device-light off: $(git ls-files | wc -l) files tracked" ;;
  *) echo "usage: scripts/device-light.sh on|off" >&2; exit 2 ;;
esac
