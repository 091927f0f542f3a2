#!/bin/bash
set -eu
mkdir -p release
cp workflows/release-notes/outputs/notes.md release/NOTES.md
echo "published for: $CHANGES"
