#!/usr/bin/env bash
# Refresh the dashboard's vendored graph-drawing library from the npm registry.
# The built bundle and its licence are committed (query/api/static/vendor), so installing or
# running the project needs neither npm nor internet; run this to move to another version:
#   scripts/refresh-dashboard-vendor.sh [VERSION]   (default: the version in vendor/VERSIONS)
set -euo pipefail
cd "$(dirname "$0")/.."
vendor=query/api/static/vendor
version=${1:-$(sed -n 's/^cytoscape //p' "$vendor/VERSIONS")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "cytoscape@$version" >/dev/null)
tar -xzf "$work"/cytoscape-*.tgz -C "$work"
cp "$work/package/dist/cytoscape.min.js" "$vendor/cytoscape.min.js"
cp "$work/package/LICENSE" "$vendor/cytoscape.LICENSE"
printf 'cytoscape %s\n' "$version" > "$vendor/VERSIONS"
echo "vendored cytoscape $version into $vendor"
