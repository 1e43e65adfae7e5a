#!/bin/sh
# Refreshes the vendored libbpf headers from Debian's libbpf-dev.
# Pinned: libbpf-dev 1:1.1.2-0+deb12u1 (Debian 12). Bump deliberately and
# regenerate (make generate) in the same commit.
set -eu
want="1:1.1.2-0+deb12u1"
have=$(dpkg-query -W -f='${Version}' libbpf-dev)
[ "$have" = "$want" ] || { echo "update.sh: libbpf-dev is $have, pinned $want" >&2; exit 1; }
cd "$(dirname "$0")"
for h in bpf_helpers.h bpf_helper_defs.h bpf_tracing.h bpf_core_read.h bpf_endian.h; do
	cp "/usr/include/bpf/$h" "$h"
done
