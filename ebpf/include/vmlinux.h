/* Architecture dispatcher: bpf2go defines __TARGET_ARCH_<arch> for each
 * -target, so one generate pass picks the matching BTF dump. */
#if defined(__TARGET_ARCH_x86)
#include "x86/vmlinux.h"
#elif defined(__TARGET_ARCH_arm64)
#include "arm64/vmlinux.h"
#else
#error "leakscope: no vmlinux.h for this target architecture (add include/<arch>/vmlinux.h)"
#endif
