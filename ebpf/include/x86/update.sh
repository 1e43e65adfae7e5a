#!/bin/sh
# Regenerates vmlinux.h from the running kernel's BTF (x86-64 hosts only).
set -eu
cd "$(dirname "$0")"
bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
