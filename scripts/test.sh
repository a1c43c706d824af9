#!/usr/bin/env bash
# Runs the whole test suite. On a fresh machine it first installs what the
# tests need: Go modules, the Node packages of the TypeScript and AG-UI client
# tests, Debian's chromium for the Studio browser tests, and a running
# PostgreSQL for the PostgreSQL store tests. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v psql >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

log "PostgreSQL"
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    ver=$(ls /etc/postgresql | sort -V | tail -1)
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  fi
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }

log "Go modules"
go mod download

log "Node packages for the TypeScript, AG-UI, A2A, LangGraph, OIDC, Studio (Playwright) and other client tests"
for d in internal/agent/tsload/testdata/zodagent tests/agui tests/clients tests/mcp tests/a2a tests/langgraph tests/oidc tests/studio tests/inspector; do
  if [ -f "$d/package-lock.json" ]; then
    (cd "$d" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
done

log "go vet"
go vet ./...

log "go test"
go test -count=1 -timeout 30m ./...
