#!/bin/sh
# Fetches a Debian 12 kernel image for ARCH (arm64 or amd64) into a cache
# and prints the image's path: the pinned linux-image-6.1.0-57-ARCH-unsigned
# 6.1.192-3 (the unsigned package, for its plain image), or, when the
# mirror no longer has that version (Debian keeps only the current point
# release's), the newest linux-image-6.1.0-*-ARCH-unsigned it has, said on
# stderr. Users: probe/kernel's guest tests (vm_linux_test.go) boot it
# under qemu, any 6.1 of Debian 12 will do (make deps fetches both); and
# arm64/update.sh dumps arm64's vmlinux.h from its BTF, which takes the
# pinned version only (--pinned). Bump the pin deliberately, then run
# arm64/update.sh and make generate in the same commit. Needs apt-get and
# dpkg-deb; not root.
#
#   fetch-kernel.sh ARCH            fetch the image unless cached; print its path
#   fetch-kernel.sh ARCH --pinned   the same, the pinned version only
#   fetch-kernel.sh ARCH --path     print where the image is cached, fetching nothing
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/debian12-ARCH/:
# the image alone (arm64's Image ~33 MB, amd64's bzImage ~8 MB), not the
# package (~60 MB), and in "package" the package and version it came
# from. apt runs on a private state directory for ARCH, so the host's dpkg
# architectures and package lists are left as they are; it reads the
# host's sources.
set -eu
arch=${1:-}
case $arch in
arm64) name=Image ;;   # booted with qemu-system-aarch64 -M virt -kernel
amd64) name=bzImage ;; # booted with qemu-system-x86_64 -kernel
*) echo "usage: fetch-kernel.sh arm64|amd64 [--path]" >&2; exit 2 ;;
esac
pkg=linux-image-6.1.0-57-$arch-unsigned
version=6.1.192-3

dir=${XDG_CACHE_HOME:-$HOME/.cache}/leakscope/debian12-$arch
image=$dir/$name
if [ "${2:-}" = --path ]; then
	echo "$image"
	exit 0
fi
if [ -f "$image" ] && { [ "${2:-}" != --pinned ] || [ "$(cat "$dir/package" 2>/dev/null)" = "$pkg=$version" ]; }; then
	echo "$image"
	exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
apt="-o APT::Architecture=$arch -o APT::Architectures::=$arch -o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp/cache -o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
apt-get $apt -qq update
if ! (cd "$tmp" && apt-get $apt -qq download "$pkg=$version" 2>"$tmp/err"); then
	if [ "${2:-}" = --pinned ]; then
		cat "$tmp/err" >&2
		echo "fetch-kernel.sh: the mirror has no $pkg=$version (snapshot.debian.org has every version)" >&2
		exit 1
	fi
	pinned="$pkg=$version"
	pkg=$(apt-cache $apt pkgnames linux-image-6.1.0- | grep -E "^linux-image-6\.1\.0-[0-9]+-$arch-unsigned\$" | sort -V | tail -n 1)
	[ -n "$pkg" ] || { cat "$tmp/err" >&2; echo "fetch-kernel.sh: the mirror has no linux-image-6.1.0-*-$arch-unsigned" >&2; exit 1; }
	version=$(apt-cache $apt show "$pkg" | sed -n 's/^Version: //p' | sort -V | tail -n 1)
	echo "fetch-kernel.sh: the mirror no longer has the pinned $pinned: fetching $pkg=$version instead" >&2
	(cd "$tmp" && apt-get $apt -qq download "$pkg=$version")
fi
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
echo "$pkg=$version" > "$dir/package"
echo "$image"
