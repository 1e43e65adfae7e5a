#!/bin/sh
# Fetches a pinned Debian 12 kernel, linux-image-6.1.0-57-ARCH-unsigned
# 6.1.192-3 (the unsigned package, for its plain image), into a cache and
# prints the image's path. ARCH is arm64 or amd64. Users:
# arm64/update.sh dumps arm64's vmlinux.h from its BTF, and probe/kernel's
# guest tests (vm_linux_test.go) boot it under qemu (make deps fetches
# both). Pinned: bump deliberately, then run arm64/update.sh and make
# generate in the same commit. Needs apt-get and dpkg-deb; not root.
#
#   fetch-kernel.sh ARCH          fetch the image unless cached; print its path
#   fetch-kernel.sh ARCH --path   print where the image is cached, fetching nothing
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/, one directory
# per package and version: the image alone (arm64's Image ~33 MB, amd64's
# bzImage ~8 MB), not the package (~60 MB). apt runs on a private state
# directory for ARCH, so the host's dpkg architectures and package lists
# are left as they are; it reads the host's sources. If the mirror no
# longer has this version, snapshot.debian.org has every version of it.
set -eu
arch=${1:-}
case $arch in
arm64) name=Image ;;   # booted with qemu-system-aarch64 -M virt -kernel
amd64) name=bzImage ;; # booted with qemu-system-x86_64 -kernel
*) echo "usage: fetch-kernel.sh arm64|amd64 [--path]" >&2; exit 2 ;;
esac
pkg=linux-image-6.1.0-57-$arch-unsigned
version=6.1.192-3

dir=${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/${pkg}_${version}
image=$dir/$name
if [ "${2:-}" = --path ] || [ -f "$image" ]; then
	echo "$image"
	exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
apt="-o APT::Architecture=$arch -o APT::Architectures::=$arch -o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp/cache -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
apt-get $apt -qq update
(cd "$tmp" && apt-get $apt -qq download "$pkg=$version")
dpkg-deb --fsys-tarfile "$tmp/${pkg}_${version}_$arch.deb" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
vmlinuz=$(ls "$tmp"/boot/vmlinuz-*)
# Debian's arm64 vmlinuz is the plain Image; gunzip one that is not.
# amd64's is a bzImage, which qemu boots as it is.
if [ "$arch" = arm64 ] && [ "$(od -An -tx1 -N2 "$vmlinuz" | tr -d ' ')" = 1f8b ]; then
	gunzip -c "$vmlinuz" > "$dir/$name.part"
else
	cp "$vmlinuz" "$dir/$name.part"
fi
mv "$dir/$name.part" "$image"
echo "$image"
