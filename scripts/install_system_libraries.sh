#!/usr/bin/env bash
# The system libraries the PDF report needs (WeasyPrint draws text with pango): installed with apt when missing.
set -euo pipefail
PACKAGES="libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"
if ldconfig -p | grep -q "libpangoft2-1.0.so.0" && ldconfig -p | grep -q "libharfbuzz-subset.so.0"; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing $PACKAGES for the PDF report"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq $PACKAGES >/dev/null
else
  echo "note: the PDF report needs $PACKAGES (apt-get install $PACKAGES as root); everything else works without them"
fi
