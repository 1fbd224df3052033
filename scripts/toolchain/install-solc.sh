#!/usr/bin/env bash
# Installs the solcjs adapter as `solc-v<version>` where py-solc-x (and so
# ape-solidity) looks for compilers, and as .solc/solc for forge and slither.
# No download: the compiler is the `solc` npm package in node_modules.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
node_bin="$(command -v node)"
version="$("$node_bin" -e "process.stdout.write(require('$root/node_modules/solc').version().split('+')[0])")"
wrapper="#!/usr/bin/env bash
exec \"$node_bin\" \"$root/scripts/toolchain/solc-adapter.cjs\" \"\$@\""
solcx_dir="${SOLCX_BINARY_PATH:-$HOME/.solcx}"
mkdir -p "$solcx_dir" "$root/.solc"
for target in "$solcx_dir/solc-v$version" "$root/.solc/solc"; do
  printf '%s\n' "$wrapper" > "$target.tmp" && chmod +x "$target.tmp" && mv "$target.tmp" "$target"
done
echo "solc $version adapter -> $solcx_dir/solc-v$version, $root/.solc/solc"
