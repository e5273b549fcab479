/* cpuid_mask.c: answer patched CPUID instructions with an older CPU's feature bits.
 *
 * bench/cpu_mask.py copies the libraries of torch, ONNX Runtime, OpenVINO and numpy and replaces each CPUID
 * instruction in their code (0F A2) with the two bytes 06 06: PUSH ES, an opcode that does not exist in
 * 64-bit mode (compilers never emit it), so the CPU raises #UD there and the kernel sends SIGILL. Loaded with
 * LD_PRELOAD, this library catches that SIGILL, executes the real CPUID with the faulting thread's EAX/ECX,
 * clears the feature bits the emulated CPU class lacks (AVX-512, VNNI, AVX-VNNI, BF16, AMX, ...), writes
 * EAX..EDX back and resumes after the two bytes. The libraries then choose their AVX2 kernels and JIT AVX2
 * code, which runs natively: the same integer and float arithmetic as an AVX2-only CPU, at this core's
 * speed for AVX2 code.  (Linux's own CPUID faulting, arch_prctl(ARCH_SET_CPUID), would avoid patching,
 * but many hypervisors do not offer it.)
 *
 * CPUID_MASK=avx2 (default) or avx512 (AVX-512 F/CD/BW/DQ/VL kept, VNNI/BF16/AMX removed: a Skylake-SP).
 * CPUID_MASK_COUNT=1 prints on exit how many CPUID instructions were answered.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static int keep_avx512 = 0;
static volatile long answered = 0;

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    if (leaf == 7 && sub == 0) {
        /* EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31. */
        uint32_t avx512_ebx = (1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
                              (1u << 30) | (1u << 31);
        /* ECX: AVX512_VBMI 1, VBMI2 6, GFNI 8, AVX512_VNNI 11, BITALG 12, VPOPCNTDQ 14. */
        uint32_t ecx_new = (1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14);
        /* EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX_BF16 22, AVX512_FP16 23, AMX_TILE 24, AMX_INT8 25. */
        uint32_t edx_new = (1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25);
        if (!keep_avx512) {
            r[1] &= ~avx512_ebx;
            r[2] &= ~(ecx_new | (1u << 8));
        } else {
            r[1] &= ~((1u << 21) | (1u << 26) | (1u << 27));
            r[2] &= ~ecx_new;
        }
        r[3] &= ~edx_new;
    } else if (leaf == 7 && sub == 1) {
        /* EAX: AVX_VNNI 4, AVX512_BF16 5, AVX_IFMA 23; EDX: AVX_VNNI_INT8 4, AVX_NE_CONVERT 5, AVX_VNNI_INT16 10. */
        r[0] &= ~((1u << 4) | (1u << 5) | (1u << 23));
        r[3] &= ~((1u << 4) | (1u << 5) | (1u << 10));
    } else if (leaf == 0xd && sub == 0 && !keep_avx512) {
        /* XSAVE state components: without AVX-512 the opmask/ZMM states (bits 5-7) are not offered. */
        r[0] &= ~(0xe0u);
    } else if (leaf == 0x1e || leaf == 0x1d) {
        /* AMX tile information. */
        r[0] = r[1] = r[2] = r[3] = 0;
    }
}

static void on_sigill(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = (ucontext_t *)context;
    greg_t *regs = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
    if (ip[0] != 0x06 || ip[1] != 0x06) {
        /* A genuine illegal instruction: die of it as without this library. */
        signal(SIGILL, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)regs[REG_RAX], sub = (uint32_t)regs[REG_RCX], r[4];
    real_cpuid(leaf, sub, r);
    mask(leaf, sub, r);
    /* CPUID writes EAX..EDX and zero-extends them into RAX..RDX. */
    regs[REG_RAX] = r[0];
    regs[REG_RBX] = r[1];
    regs[REG_RCX] = r[2];
    regs[REG_RDX] = r[3];
    regs[REG_RIP] += 2;
    __atomic_add_fetch(&answered, 1, __ATOMIC_RELAXED);
    (void)sig;
    (void)info;
}

static void report(void) {
    char line[96];
    int n = snprintf(line, sizeof line, "cpuid_mask: %ld CPUID instructions answered\n", answered);
    if (n > 0) (void)!write(2, line, (size_t)n);
}

__attribute__((constructor)) static void install(void) {
    const char *mode = getenv("CPUID_MASK");
    keep_avx512 = mode != NULL && strcmp(mode, "avx512") == 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigill;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGILL, &action, NULL);
    const char *count = getenv("CPUID_MASK_COUNT");
    if (count != NULL && strcmp(count, "1") == 0) atexit(report);
}
