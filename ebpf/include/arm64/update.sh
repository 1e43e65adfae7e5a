#!/bin/sh
# Regenerates vmlinux.h for arm64 on any host, from the BTF inside
# Debian 12's arm64 kernel image (the unsigned package, for its plain
# Image). Pinned: linux-image-6.1.0-57-arm64-unsigned 6.1.192-3; bump
# deliberately and regenerate (make generate) in the same commit. Needs
# apt-get, dpkg-deb and bpftool (root is not needed).
#
# apt runs on a private state directory, so the host's dpkg architectures
# and package lists are left as they are. An Image is not an ELF file: its
# BTF is found by the header every raw BTF blob starts with (magic 0xeb9f,
# version 1, flags 0, hdr_len 24), and its length is hdr_len + str_off +
# str_len from that header (the strings follow the types). If the mirror
# no longer has this version, snapshot.debian.org has every version of it.
set -eu
pkg=linux-image-6.1.0-57-arm64-unsigned
version=6.1.192-3
out=$(cd "$(dirname "$0")" && pwd)/vmlinux.h

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
apt="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp/cache -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
apt-get $apt -qq update
(cd "$tmp" && apt-get $apt -qq download "$pkg=$version")
dpkg-deb --fsys-tarfile "$tmp/${pkg}_${version}_arm64.deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
image=$(ls "$tmp"/boot/vmlinuz-*)
# Debian's arm64 vmlinuz is the plain Image; gunzip one that is not.
if [ "$(od -An -tx1 -N2 "$image" | tr -d ' ')" = 1f8b ]; then
	gunzip -c "$image" > "$tmp/Image"
	image=$tmp/Image
fi

offs=$(LC_ALL=C grep -obUaP '\x9f\xeb\x01\x00\x18\x00\x00\x00' "$image" | cut -d: -f1)
[ "$(echo "$offs" | wc -w)" -eq 1 ] || { echo "update.sh: want one BTF header in $image, found: $offs" >&2; exit 1; }
# struct btf_header: magic, version, flags, hdr_len, then type_off,
# type_len, str_off, str_len (u32, little-endian), relative to its end.
set -- $(od -An -tu4 -j $((offs + 8)) -N 16 "$image")
len=$((24 + $3 + $4))
tail -c +$((offs + 1)) "$image" | head -c "$len" > "$tmp/btf"
bpftool btf dump file "$tmp/btf" format c > "$tmp/vmlinux.h"
grep -q '^struct user_pt_regs {' "$tmp/vmlinux.h" || { echo "update.sh: the BTF found is not arm64's kernel" >&2; exit 1; }
mv "$tmp/vmlinux.h" "$out"
