/* Architecture dispatcher: bpf2go defines __TARGET_ARCH_<arch> for each
 * -target, so one generate pass picks the matching BTF dump. */
#if defined(__TARGET_ARCH_x86)
#include "x86/vmlinux.h"
#elif defined(__TARGET_ARCH_arm64)
/* Its kernel (6.1) has enum kprobe_slot_state, whose SLOT_USED would
 * clash with leakscope.h's enum slot_state: the kernel's is renamed. */
#define SLOT_USED KPROBE_SLOT_USED
#include "arm64/vmlinux.h"
#undef SLOT_USED
#else
#error "leakscope: no vmlinux.h for this target architecture (add include/<arch>/vmlinux.h)"
#endif
