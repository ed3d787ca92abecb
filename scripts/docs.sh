#!/usr/bin/env bash
# Builds the docs site from docs/ and mkdocs.yml with mkdocs-material (`make docs`), and checks it.
#   bash scripts/docs.sh          builds the site (mkdocs build --strict: a broken link, anchor or
#                                 included file fails it); the last line printed is its folder
#   bash scripts/docs.sh --browser
#                                 builds it, then renders it in Debian's headless Chromium
#                                 (scripts/docs-browser.py): every page loads, no broken internal
#                                 link, search finds a setting; prints the path of a screenshot
#                                 of the quick start. Installs Debian's chromium as root; without
#                                 it the browser part says "docs skipped: ..." and the reason.
# Installs, idempotently, outside the clone (as the recipes do):
#   - $IDGEN_CACHE/docs/venv: a venv of python3 with mkdocs-material pinned from PyPI (and the
#     mkdocs and pymdown-extensions it runs with); rebuilt only when the pins change
#   - the site in $IDGEN_CACHE/docs/site, the screenshot in $IDGEN_CACHE/docs/
# IDGEN_CACHE is ${XDG_CACHE_HOME:-$HOME/.cache}/idgen, beside the cargo target folder. Needs no
# root and no PostgreSQL for the build; the SQL examples run in tests/cluster/tests/docs.rs.
set -uo pipefail
export NO_MKDOCS_2_WARNING=1  # mkdocs-material's banner about its successor, on every build
cd "$(dirname "$0")/.."
source scripts/setup.sh

MKDOCS_PINS=(mkdocs-material==9.8.1 mkdocs==1.6.1 pymdown-extensions==13.1)
IDGEN_CACHE=${IDGEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idgen}
DOCS=$IDGEN_CACHE/docs
VENV=$DOCS/venv
SITE=$DOCS/site

browser=0
case "${1:-}" in
    "") ;;
    --browser) browser=1 ;;
    *) echo "usage: bash scripts/docs.sh [--browser]" >&2; exit 2 ;;
esac

mkdir -p "$DOCS"

# The venv, kept while its record of the pins matches.
want="${MKDOCS_PINS[*]}"
if ! [ -x "$VENV/bin/mkdocs" ] || [ "$(cat "$VENV/.idgen-packages" 2>/dev/null)" != "$want" ]; then
    idgen_log "venv $VENV ($want)"
    rm -rf "$VENV"
    if ! python3 -m venv "$VENV" 2>/dev/null; then
        # Debian's python3 makes venvs only with python3-venv.
        rm -rf "$VENV"
        if [ "$(id -u)" = 0 ]; then idgen_apt_install python3-venv; fi
        python3 -m venv "$VENV" || { echo "scripts/docs.sh: python3 -m venv failed" >&2; exit 1; }
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check "${MKDOCS_PINS[@]}" ||
        { echo "scripts/docs.sh: pip install ${MKDOCS_PINS[*]} failed (PyPI unreachable?)" >&2; exit 1; }
    echo "$want" >"$VENV/.idgen-packages"
fi

idgen_log "mkdocs build --strict (into $SITE)"
"$VENV/bin/mkdocs" build --strict --clean --site-dir "$SITE" || exit 1

if [ $browser = 1 ]; then
    chromium=$(command -v chromium || true)
    if [ -z "$chromium" ] && [ "$(id -u)" = 0 ]; then
        idgen_apt_install chromium && chromium=$(command -v chromium || true)
    fi
    if [ -z "$chromium" ]; then
        if [ "$(id -u)" = 0 ]; then
            echo "docs skipped: browser check: apt-get install chromium failed"
        else
            echo "docs skipped: browser check: no chromium, and installing Debian's needs root"
        fi
    else
        python3 scripts/docs-browser.py --chromium "$chromium" --site "$SITE" \
            --screenshot "$DOCS/quick-start.png" || exit 1
    fi
fi
echo "$SITE"
