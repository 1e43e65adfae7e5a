#!/bin/sh
# Fetches the pinned arm64 kernel, Debian 12's
# linux-image-6.1.0-57-arm64-unsigned 6.1.192-3 (the unsigned package, for
# its plain Image), into a cache and prints the Image's path. Two users:
# update.sh dumps vmlinux.h from its BTF, and probe/kernel's
# TestArm64VerifierInVM boots it under qemu-system-aarch64 (make deps
# fetches it). Pinned: bump deliberately, then run update.sh and make
# generate in the same commit. Needs apt-get and dpkg-deb; not root.
#
#   fetch-kernel.sh          fetch the Image unless cached; print its path
#   fetch-kernel.sh --path   print where the Image is cached, fetching nothing
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/, one directory
# per pinned version: the Image alone (~33 MB), not the package (~60 MB).
# apt runs on a private state directory, so the host's dpkg architectures
# and package lists are left as they are; it reads the host's sources. If
# the mirror no longer has this version, snapshot.debian.org has every
# version of it.
set -eu
pkg=linux-image-6.1.0-57-arm64-unsigned
version=6.1.192-3

dir=${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/${pkg}_${version}
image=$dir/Image
if [ "${1:-}" = --path ] || [ -f "$image" ]; then
	echo "$image"
	exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
apt="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp/cache -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
apt-get $apt -qq update
(cd "$tmp" && apt-get $apt -qq download "$pkg=$version")
dpkg-deb --fsys-tarfile "$tmp/${pkg}_${version}_arm64.deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
vmlinuz=$(ls "$tmp"/boot/vmlinuz-*)
# Debian's arm64 vmlinuz is the plain Image; gunzip one that is not.
if [ "$(od -An -tx1 -N2 "$vmlinuz" | tr -d ' ')" = 1f8b ]; then
	gunzip -c "$vmlinuz" > "$dir/Image.part"
else
	cp "$vmlinuz" "$dir/Image.part"
fi
mv "$dir/Image.part" "$image"
echo "$image"
