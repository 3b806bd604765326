#!/usr/bin/env python3
"""Generates ../vec_amd64.s: the AVX-512 and AVX2+FMA kernels of package vec.

Every kernel is a loop over 16 elements per step (one zmm, or two ymm so that element i
always lands in lane i mod 16, the lane order the pure-Go twins and fold16 assume), and a
masked tail (opmask K1 on AVX-512, VMASKMOVPS with a mask from tailmask<> on AVX2), so any
length and alignment works. Run: python3 internal/asmgen.py > vec_amd64.s
"""

CONSTS = [
    ("lo", "f", -104.0), ("loflush", "f", -87.0), ("hi", "f", 89.0), ("log2e", "f", 1.44269504088896341),
    ("ln2hi", "f", 0.693359375), ("ln2lo", "f", -2.12194440e-4),
    ("p0", "f", 1.9875691500e-4), ("p1", "f", 1.3981999507e-3), ("p2", "f", 8.3334519073e-3),
    ("p3", "f", 4.1665795894e-2), ("p4", "f", 1.6666665459e-1), ("p5", "f", 5.0000001201e-1),
    ("one", "f", 1.0), ("i127", "i", 127), ("erfp", "f", 0.3275911),
    ("a1", "f", 0.254829592), ("a2", "f", -0.284496736), ("a3", "f", 1.421413741),
    ("a4", "f", -1.453152027), ("a5", "f", 1.061405429), ("half", "f", 0.5),
    ("isqrt2", "f", 0.70710678118654752), ("absmask", "i", 0x7fffffff),
    ("signmask", "i", 0x80000000), ("zero", "i", 0), ("neginf", "i", 0xff800000),
    ("nan", "i", 0x7fc00000), ("f255", "f", 255.0),
    # expU8's reduction and polynomial (generic.go's expU8 constants)
    ("ln2", "f", 0.693147180559945309), ("q2", "f", 0.5000491738319397),
    ("q3", "f", 0.16753514111042023), ("q4", "f", 0.04129645600914955),
]
OFF = {name: 64 * i for i, (name, _, _) in enumerate(CONSTS)}

import struct


def c(name):
    return "consts<>+%d(SB)" % OFF[name]


def data():
    out = []
    for name, kind, v in CONSTS:
        bits = struct.unpack("<I", struct.pack("<f", v))[0] if kind == "f" else v
        for j in range(16):
            out.append("DATA consts<>+%d(SB)/4, $0x%08x" % (OFF[name] + 4 * j, bits))
    out.append("GLOBL consts<>(SB), RODATA|NOPTR, $%d" % (64 * len(CONSTS)))
    for j in range(16):
        out.append("DATA tailmask<>+%d(SB)/4, $0x%08x" % (4 * j, 0xffffffff if j < 8 else 0))
    out.append("GLOBL tailmask<>(SB), RODATA|NOPTR, $64")
    for j, v in enumerate((0, 4, 1, 5, 2, 6, 3, 7)):
        out.append("DATA u8perm<>+%d(SB)/4, $%d" % (4 * j, v))
    out.append("GLOBL u8perm<>(SB), RODATA|NOPTR, $32")
    return "\n".join(out)


def exp(V, x, n, r, p, k="K4", cr=None, u8=False):
    """exp of register x in place; lo/hi must be in V('16')/V('17') (zmm) or Y15/Y14 (ymm).

    Lanes clamped to lo give exactly 0 (exp(lo) rounds to 0 in float32), and they get it
    without the final scaling, whose underflowing result would cost a microcode assist
    (FTZ is off) of about a hundred cycles per vector: a masked key's score is −Inf, and a
    padded batch's softmax rows are full of them. Kept in K4 (zmm) or, on AVX2, folded into
    the second power of two as +0. The test is NLE_UQ, true for NaN, so NaN lanes stay NaN.
    k is the opmask register for that test (zmm); cr, when given, maps the polynomial's
    constants to the registers holding them (zmm), instead of reading them from consts<>.
    u8 selects expU8's cheaper form, for values that end as 8-bit probabilities: one
    reduction step by ln2 rounded to float32 and a degree-4 polynomial (relative error
    below 7e-6, against 2 ulps), four vector operations fewer.
    """
    lo, hi = (("Z16", "Z17") if V == "Z" else ("Y15", "Y14"))
    const = cr.get if cr else c  # constants held in registers, or in memory
    s = [
        "VMAXPS %s, %s, %s" % (x, lo, x),  # x is the second source: a NaN x stays NaN
        "VMINPS %s, %s, %s" % (x, hi, x),
        "VMULPS %s, %s, %s" % (const("log2e"), x, n),
    ]
    if V == "Z":
        s.append("VCMPPS $0x16, %s, %s, %s" % (lo, x, k))  # k = !(x <= lo)
    s.append("VRNDSCALEPS $0, %s, %s" % (n, n) if V == "Z" else "VROUNDPS $0, %s, %s" % (n, n))
    s.append("VMOVAPS %s, %s" % (x, r))
    if u8:
        s.append("VFNMADD231PS %s, %s, %s" % (const("ln2"), n, r))
        first, rest = "q4", ("q3", "q2", "one", "one")
    else:
        s += ["VFNMADD231PS %s, %s, %s" % (const("ln2hi"), n, r), "VFNMADD231PS %s, %s, %s" % (const("ln2lo"), n, r)]
        first, rest = "p0", ("p1", "p2", "p3", "p4", "p5", "one", "one")
    s.append(("VMOVAPS %s, %s" if cr else "VMOVUPS %s, %s") % (const(first), p))
    for name in rest:
        s.append("VFMADD213PS %s, %s, %s" % (const(name), r, p))
    if V == "Z":
        s.append("VSCALEFPS.Z %s, %s, %s, %s" % (n, p, k, x))
    else:
        s += [
            "VCVTPS2DQ %s, %s" % (n, n),
            "VPSRAD $1, %s, %s" % (n, r),
            "VPSUBD %s, %s, %s" % (r, n, n),
            "VPADDD %s, %s, %s" % (const("i127"), r, r),
            "VPADDD %s, %s, %s" % (const("i127"), n, n),
            "VPSLLD $23, %s, %s" % (r, r),
            "VPSLLD $23, %s, %s" % (n, n),
            "VMULPS %s, %s, %s" % (r, p, p),
            "VCMPPS $0x16, %s, %s, %s" % (lo, x, r),  # r = !(x <= lo): all ones or 0
            "VANDPS %s, %s, %s" % (r, n, n),
            "VMULPS %s, %s, %s" % (n, p, x),
        ]
    return s


def erf(V, x, t, p, e, a, n, r, q):
    """erf of register x in place (A&S 7.1.26)."""
    return [
        "VANDPS %s, %s, %s" % (c("absmask"), x, a),
        "VMOVUPS %s, %s" % (c("one"), t),
        "VFMADD231PS %s, %s, %s" % (c("erfp"), a, t),  # t = p·a + 1
        "VMOVUPS %s, %s" % (c("one"), q),
        "VDIVPS %s, %s, %s" % (t, q, t),  # t = 1/t
        "VMOVUPS %s, %s" % (c("a5"), p),
        "VFMADD213PS %s, %s, %s" % (c("a4"), t, p),
        "VFMADD213PS %s, %s, %s" % (c("a3"), t, p),
        "VFMADD213PS %s, %s, %s" % (c("a2"), t, p),
        "VFMADD213PS %s, %s, %s" % (c("a1"), t, p),
        "VMULPS %s, %s, %s" % (a, a, e),
        "VMOVUPS %s, %s" % (c("zero"), q),
        "VSUBPS %s, %s, %s" % (e, q, e),  # e = −a²
    ] + exp(V, e, n, r, q) + [
        "VMULPS %s, %s, %s" % (t, p, p),
        "VMULPS %s, %s, %s" % (e, p, p),
        "VMOVUPS %s, %s" % (c("one"), q),
        "VSUBPS %s, %s, %s" % (p, q, q),  # q = 1 − p·t·e
        "VANDPS %s, %s, %s" % (c("signmask"), x, x),
        "VORPS %s, %s, %s" % (q, x, x),
    ]


def gelu(V, x, h, t, p, e, a, n, r, q):
    return [
        "VMULPS %s, %s, %s" % (c("half"), x, h),
        "VMULPS %s, %s, %s" % (c("isqrt2"), x, x),
    ] + erf(V, x, t, p, e, a, n, r, q) + [
        "VADDPS %s, %s, %s" % (c("one"), x, x),
        "VMULPS %s, %s, %s" % (h, x, x),
    ]


def fold(V, op):
    s = []
    if V == "Z":
        s += ["VEXTRACTF64X4 $1, Z0, Y1", "%s Y1, Y0, Y0" % op]
    else:
        s += ["%s Y1, Y0, Y0" % op]
    s += [
        "VEXTRACTF128 $1, Y0, X1", "%s X1, X0, X0" % op,
        "VMOVHLPS X0, X1, X1", "%s X1, X0, X0" % op,
        "VMOVSHDUP X0, X1", "%sS X1, X0, X0" % op[:-1],
    ]
    return s


class K:
    """One kernel: pointer args (loaded into regs), scalar float args (broadcast), body."""

    def __init__(self, name, ptrs, scalars, body, ret=None, init=None, acc_init=None, wide=None, lo="lo"):
        self.name, self.ptrs, self.scalars, self.body, self.ret = name, ptrs, scalars, body, ret
        # lo: the constant exp clamps at, its lanes at or below it giving 0
        self.lo = lo
        self.init, self.acc_init = init or [], acc_init
        # wide: per vector kind, two more accumulator registers for a four-way main loop
        self.wide = wide


PREG = ["DI", "SI", "DX", "R8"]


def emit(k, V):
    W = 16 if V == "Z" else 8
    suf = "512" if V == "Z" else "256"
    args = [(p, 8) for p in k.ptrs] + [("n", 8)] + [(s, 4) for s in k.scalars]
    off, sig = 0, []
    for a, sz in args:
        if sz == 8 and off % 8:
            off += 4
        sig.append((a, off, sz))
        off += sz
    argsize = off
    if k.ret:
        off = (off + 7) // 8 * 8  # results start pointer-aligned
        retoff = off
        off += 4
    L = ["", "// func %s%s(%s)%s" % (k.name, suf, ", ".join(
        "%s %s" % (a, "*float32" if sz == 8 and a != "n" else ("int" if a == "n" else "float32")) for a, _, sz in sig),
        " float32" if k.ret else ""),
        "TEXT ·%s%s(SB), NOSPLIT, $0-%d" % (k.name, suf, off)]
    for i, (a, o, sz) in enumerate(sig):
        if a == "n":
            L.append("MOVQ n+%d(FP), CX" % o)
        elif sz == 8:
            L.append("MOVQ %s+%d(FP), %s" % (a, o, PREG[k.ptrs.index(a)]))
    scal = {}
    for i, (a, o, sz) in enumerate(sig):
        if sz == 4:
            j = i - len(k.ptrs) - 1  # scalar index
            reg = "Z%d" % (31 - j) if V == "Z" else ["Y13", "Y11"][j]
            L.append("VBROADCASTSS %s+%d(FP), %s" % (a, o, reg))
            scal[a] = reg
    if V == "Z":
        L += ["VMOVUPS %s, Z16" % c(k.lo), "VMOVUPS %s, Z17" % c("hi")]
    else:
        L += ["VMOVUPS %s, Y15" % c(k.lo), "VMOVUPS %s, Y14" % c("hi")]
    if k.ret:
        init = k.acc_init or "zero"
        L += ["VMOVUPS %s, %s0" % (c(init), V), "VMOVUPS %s, %s1" % (c(init), V)]
    L += k.init
    if k.wide:
        # Four accumulators over 64 elements per step: a single one makes the loop wait on
        # VMAXPS's 4-cycle latency every vector. Only for ops whose result does not depend
        # on the order (max), so the fold below matches the generic twin bit for bit.
        a4 = ["%s0" % V, "%s1" % V] + k.wide[V]
        L += ["VMOVUPS %s, %s" % (c(k.acc_init or "zero"), r) for r in k.wide[V]]
        L.append("loop4:")
        L += ["CMPQ CX, $%d" % (4 * W), "JLT loop"]
        for i in range(4):
            L += k.body(V, {"disp": i * W * 4, "acc": a4[i], "mask": None, "s": scal})
        L += ["ADDQ $%d, %s" % (4 * W * 4, r) for r in PREG[: len(k.ptrs)]]
        L += ["SUBQ $%d, CX" % (4 * W), "JMP loop4"]
    # main loop: 16 elements per step
    L.append("loop:")
    L += ["CMPQ CX, $16", "JLT tail"]
    steps = [(0, "0")] if V == "Z" else [(0, "0"), (32, "1")]
    for disp, acc in steps:
        L += k.body(V, {"disp": disp, "acc": V + acc, "mask": None, "s": scal})
    L += ["ADDQ $64, %s" % r for r in PREG[: len(k.ptrs)]]
    L += ["SUBQ $16, CX", "JMP loop", "tail:"]
    if V == "Z":
        L += ["TESTQ CX, CX", "JEQ done", "MOVL $1, AX", "SHLL CX, AX", "DECL AX", "KMOVW AX, K1"]
        L += k.body(V, {"disp": 0, "acc": "Z0", "mask": "K1", "s": scal})
    else:
        L += ["CMPQ CX, $8", "JLT tail0"]
        L += k.body(V, {"disp": 0, "acc": "Y0", "mask": None, "s": scal})
        L += ["ADDQ $32, %s" % r for r in PREG[: len(k.ptrs)]]
        L += ["SUBQ $8, CX", "TESTQ CX, CX", "JEQ done"]
        L += ["LEAQ tailmask<>+32(SB), AX", "SHLQ $2, CX", "SUBQ CX, AX", "VMOVUPS (AX), Y12"]
        L += k.body(V, {"disp": 0, "acc": "Y1", "mask": "Y12", "s": scal})
        L += ["JMP done", "tail0:", "TESTQ CX, CX", "JEQ done"]
        L += ["LEAQ tailmask<>+32(SB), AX", "SHLQ $2, CX", "SUBQ CX, AX", "VMOVUPS (AX), Y12"]
        L += k.body(V, {"disp": 0, "acc": "Y0", "mask": "Y12", "s": scal})
    L.append("done:")
    if k.wide:
        w = k.wide[V]
        L += ["%s %s, %s, %s" % (k.ret, w[0], "%s0" % V, "%s0" % V), "%s %s, %s, %s" % (k.ret, w[1], "%s1" % V, "%s1" % V)]
        if V == "Z":  # the 256 fold combines Y0 and Y1 itself
            L += ["%s Z1, Z0, Z0" % k.ret]
    if k.ret:
        L += fold(V, k.ret)
        if k.name == "max":  # a NaN anywhere makes the result NaN
            ok = "max%s_ok" % suf
            if V == "Z":
                L += ["KORTESTW K3, K3", "JEQ " + ok]
            else:
                L += ["VMOVMSKPS Y10, AX", "TESTL AX, AX", "JEQ " + ok]
            L += ["MOVSS %s, X0" % c("nan"), ok + ":"]
        L.append("MOVSS X0, ret+%d(FP)" % retoff)
    L += ["VZEROUPPER", "RET"]
    out = []
    for line in L:
        out.append(line if line.endswith(":") or line.startswith("//") or line.startswith("TEXT") or line == "" else "\t" + line)
    return "\n".join(out).replace("loop4:", k.name + suf + "_loop4:").replace("JMP loop4", "JMP %s%s_loop4" % (k.name, suf)) \
        .replace("loop:", k.name + suf + "_loop:").replace("JMP loop\n", "JMP %s%s_loop\n" % (k.name, suf)) \
        .replace("JLT loop\n", "JLT %s%s_loop\n" % (k.name, suf)) \
        .replace("tail0:", k.name + suf + "_tail0:").replace("JLT tail0", "JLT %s%s_tail0" % (k.name, suf)) \
        .replace("tail:", k.name + suf + "_tail:").replace("JLT tail\n", "JLT %s%s_tail\n" % (k.name, suf)) \
        .replace("done:", k.name + suf + "_done:").replace("JEQ done", "JEQ %s%s_done" % (k.name, suf)) \
        .replace("JMP done", "JMP %s%s_done" % (k.name, suf))


def load(V, ctx, reg, ptr, fill=None):
    """Loads 16 (zmm) or 8 (ymm) elements at ptr+disp into reg; masked lanes get 0 (or fill)."""
    d, m = ctx["disp"], ctx["mask"]
    if m is None:
        return ["VMOVUPS %d(%s), %s" % (d, ptr, reg)]
    if V == "Z":
        if fill:
            return ["VMOVUPS %s, %s" % (c(fill), reg), "VMOVUPS (%s), K1, %s" % (ptr, reg)]
        return ["VMOVUPS.Z (%s), K1, %s" % (ptr, reg)]
    s = ["VMASKMOVPS (%s), Y12, %s" % (ptr, reg)]
    if fill:
        s += ["VMOVUPS %s, Y11" % c(fill), "VBLENDVPS Y12, %s, Y11, %s" % (reg, reg)]
    return s


def store(V, ctx, reg, ptr):
    d, m = ctx["disp"], ctx["mask"]
    if m is None:
        return ["VMOVUPS %s, %d(%s)" % (reg, d, ptr)]
    if V == "Z":
        return ["VMOVUPS %s, K1, (%s)" % (reg, ptr)]
    return ["VMASKMOVPS %s, Y12, (%s)" % (reg, ptr)]


def accum(V, ctx, op, reg):
    acc, m = ctx["acc"], ctx["mask"]
    if m is None:
        return ["%s %s, %s, %s" % (op, reg, acc, acc)]
    if V == "Z":
        return ["%s %s, %s, K1, %s" % (op, reg, acc, acc)]
    if op == "VMAXPS":  # masked lanes were filled with −Inf
        return ["%s %s, %s, %s" % (op, reg, acc, acc)]
    return ["VANDPS Y12, %s, %s" % (reg, reg), "%s %s, %s, %s" % (op, reg, acc, acc)]


def R(V, i):
    return "%s%d" % (V, i)


def body_expsum(V, ctx):
    x, n, r, p = (R(V, i) for i in (2, 3, 4, 5)) if ctx["acc"][1:] == "0" else (R(V, i) for i in (6, 7, 8, 9))
    return load(V, ctx, x, "SI") + ["VSUBPS %s, %s, %s" % (ctx["s"]["shift"], x, x)] + exp(V, x, n, r, p) + \
        store(V, ctx, x, "DI") + accum(V, ctx, "VADDPS", x)


def body_max(V, ctx):
    x, t = R(V, 2), R(V, 3)
    s = load(V, ctx, x, "DI", fill="neginf")
    if V == "Z":
        s += ["VCMPPS $3, %s, %s, K2" % (x, x), "KORW K2, K3, K3"]
    else:
        s += ["VCMPPS $3, %s, %s, %s" % (x, x, t), "VORPS %s, Y10, Y10" % t]
    return s + accum(V, ctx, "VMAXPS", x)


def body_scale(V, ctx):
    x = R(V, 2)
    return load(V, ctx, x, "DI") + ["VMULPS %s, %s, %s" % (ctx["s"]["c"], x, x)] + store(V, ctx, x, "DI")


def body_shift(V, ctx):
    x = R(V, 2)
    return load(V, ctx, x, "DI") + ["VADDPS %s, %s, %s" % (ctx["s"]["c"], x, x)] + store(V, ctx, x, "DI")


def body_div(V, ctx):
    x = R(V, 2)
    return load(V, ctx, x, "DI") + ["VDIVPS %s, %s, %s" % (ctx["s"]["c"], x, x)] + store(V, ctx, x, "DI")


def body_add(V, ctx):
    x, y = R(V, 2), R(V, 3)
    return load(V, ctx, x, "SI") + load(V, ctx, y, "DX") + ["VADDPS %s, %s, %s" % (y, x, x)] + store(V, ctx, x, "DI")


def body_sub(V, ctx):
    x, y = R(V, 2), R(V, 3)
    return load(V, ctx, x, "SI") + load(V, ctx, y, "DX") + ["VSUBPS %s, %s, %s" % (y, x, x)] + store(V, ctx, x, "DI")


def relu(V, x, t):
    # max(0, x) keeps a NaN x (second source); adding +0 turns −0 into +0 as the graph's Relu
    return ["VMOVUPS %s, %s" % (c("zero"), t), "VMAXPS %s, %s, %s" % (x, t, x), "VADDPS %s, %s, %s" % (t, x, x)]


def body_relu(V, ctx):
    x, t = R(V, 2), R(V, 3)
    return load(V, ctx, x, "SI") + relu(V, x, t) + store(V, ctx, x, "DI")


def body_biasrelu(V, ctx):
    x, y = R(V, 2), R(V, 3)
    return load(V, ctx, x, "DI") + load(V, ctx, y, "SI") + ["VADDPS %s, %s, %s" % (y, x, x)] + relu(V, x, y) + \
        store(V, ctx, x, "DI")


def body_biasgelu(V, ctx):
    x, y = R(V, 2), R(V, 3)
    return load(V, ctx, x, "DI") + load(V, ctx, y, "SI") + ["VADDPS %s, %s, %s" % (y, x, x)] + \
        gelu(V, x, *(R(V, i) for i in (3, 4, 5, 6, 7, 8, 9, 10))) + store(V, ctx, x, "DI")


def body_gelu(V, ctx):
    x = R(V, 2)
    return load(V, ctx, x, "SI") + gelu(V, x, *(R(V, i) for i in (3, 4, 5, 6, 7, 8, 9, 10))) + store(V, ctx, x, "DI")


def body_erf(V, ctx):
    x = R(V, 2)
    return load(V, ctx, x, "SI") + erf(V, x, *(R(V, i) for i in (3, 4, 5, 6, 7, 8, 9))) + store(V, ctx, x, "DI")


def body_sum(V, ctx):
    x = R(V, 2) if ctx["acc"][1:] == "0" else R(V, 3)
    return load(V, ctx, x, "DI") + accum(V, ctx, "VADDPS", x)


def body_sqdev(V, ctx):
    x = R(V, 2) if ctx["acc"][1:] == "0" else R(V, 3)
    s = load(V, ctx, x, "DI") + ["VSUBPS %s, %s, %s" % (ctx["s"]["mu"], x, x)]
    if ctx["mask"] is not None and V == "Z":
        return s + ["VFMADD231PS %s, %s, K1, %s" % (x, x, ctx["acc"])]
    if ctx["mask"] is not None:
        s += ["VANDPS Y12, %s, %s" % (x, x)]
    return s + ["VFMADD231PS %s, %s, %s" % (x, x, ctx["acc"])]


def body_dot(V, ctx):
    x, y = (R(V, 2), R(V, 4)) if ctx["acc"][1:] == "0" else (R(V, 3), R(V, 5))
    # masked lanes load as 0 (zmm zeroing, ymm VMASKMOVPS), so their products add nothing
    return load(V, ctx, x, "DI") + load(V, ctx, y, "SI") + ["VFMADD231PS %s, %s, %s" % (y, x, ctx["acc"])]


def body_norm(V, ctx, bias):
    x, g = R(V, 2), R(V, 3)
    s = load(V, ctx, x, "SI") + load(V, ctx, g, "DX") + [
        "VSUBPS %s, %s, %s" % (ctx["s"]["mu"], x, x),
        "VMULPS %s, %s, %s" % (ctx["s"]["is"], x, x),
    ]
    if bias:
        s += load(V, ctx, R(V, 4), "R8") + ["VFMADD213PS %s, %s, %s" % (R(V, 4), g, x)]
    else:
        s += ["VMULPS %s, %s, %s" % (g, x, x)]
    return s + store(V, ctx, x, "DI")


def body_eluadd(V, ctx):
    # dst = max(x, 0) + (alpha·(e^min(x, 0) − 1) + c), eluAddGeneric's roundings: min and max
    # by the sign bit (a NaN goes to one side and stays NaN), then exp as expSum takes it.
    x, m, n, r, p, t = (R(V, i) for i in (2, 3, 4, 5, 6, 7))
    sc = ctx["s"]
    return load(V, ctx, x, "SI") + [
        "VPSRAD $31, %s, %s" % (x, t),  # all ones where the sign bit is set
        "VANDPS %s, %s, %s" % (t, x, m),  # min(x, 0)
        "VANDNPS %s, %s, %s" % (x, t, t),  # max(x, 0): x where the sign bit is clear
    ] + exp(V, m, n, r, p) + [
        "VSUBPS %s, %s, %s" % (c("one"), m, m),
        "VMULPS %s, %s, %s" % (sc["alpha"], m, m),
        "VADDPS %s, %s, %s" % (sc["c"], m, m),
        "VADDPS %s, %s, %s" % (m, t, m),
    ] + store(V, ctx, m, "DI")


KERNELS = [
    K("expSum", ["dst", "src"], ["shift"], body_expsum, ret="VADDPS"),
    # expSumFlush: expSum with every value at or below exp(−87) (the subnormal ones among
    # them) made 0, for probabilities that go on into products (expFlush32 is the statement).
    K("expSumFlush", ["dst", "src"], ["shift"], body_expsum, ret="VADDPS", lo="loflush"),
    K("max", ["src"], [], body_max, ret="VMAXPS", acc_init="neginf", wide={"Z": ["Z18", "Z19"], "Y": ["Y4", "Y5"]}),
    K("scale", ["dst"], ["c"], body_scale),
    K("div", ["dst"], ["c"], body_div),
    K("shift", ["dst"], ["c"], body_shift),
    K("add", ["dst", "src", "src2"], [], body_add),
    K("sub", ["dst", "src", "src2"], [], body_sub),
    K("relu", ["dst", "src"], [], body_relu),
    K("biasRelu", ["dst", "src"], [], body_biasrelu),
    K("biasGelu", ["dst", "src"], [], body_biasgelu),
    K("gelu", ["dst", "src"], [], body_gelu),
    K("erf", ["dst", "src"], [], body_erf),
    K("eluAdd", ["dst", "src"], ["alpha", "c"], body_eluadd),
    K("sum", ["src"], [], body_sum, ret="VADDPS"),
    K("sqDev", ["src"], ["mu"], body_sqdev, ret="VADDPS"),
    K("dot", ["a", "b"], [], body_dot, ret="VADDPS"),
    K("norm", ["dst", "src", "gamma"], ["mu", "is"], lambda V, ctx: body_norm(V, ctx, False)),
    K("normBias", ["dst", "src", "gamma", "beta"], ["mu", "is"], lambda V, ctx: body_norm(V, ctx, True)),
]


def emit_expsum_u8(V):
    """expSumU8: expSum's exp and sum over n (a multiple of 16) elements, the exp values
    not stored but quantized to bytes, clamp(rne(e·255), 0, 255): the probabilities of an
    int8 attention block at the scale 1/255 (expSumU8Generic is the Go statement). e·255
    is clamped at 255 before its conversion (NaN kept: VMINPS returns its second source for
    a NaN), which would turn values from 2³¹ up into INT_MIN and so 0."""
    suf = "512" if V == "Z" else "256"
    name = "expSumU8" + suf
    L = ["", "// func %s(dst *uint8, src *float32, n int, shift float32) float32" % name,
         "TEXT ·%s(SB), NOSPLIT, $0-36" % name,
         "MOVQ dst+0(FP), DI", "MOVQ src+8(FP), SI", "MOVQ n+16(FP), CX"]
    names = ("log2e", "ln2", "q2", "q3", "q4", "one")
    cr = {nm: "Z%d" % (20 + i) for i, nm in enumerate(names)}
    if V == "Z":
        L += ["VBROADCASTSS shift+24(FP), Z31", "VMOVUPS %s, Z16" % c("lo"), "VMOVUPS %s, Z17" % c("hi"),
              "VMOVUPS %s, Z18" % c("f255"), "VPXORD Z19, Z19, Z19", "VMOVUPS %s, Z0" % c("zero"),
              "VMOVUPS %s, Z1" % c("zero")]
        L += ["VMOVUPS %s, %s" % (c(nm), cr[nm]) for nm in names]
        # two independent vectors a step, each summed into its own accumulator
        L += [name + "_loop2:", "CMPQ CX, $32", "JLT %s_loop" % name]
        for j, (x, n, r, pp, acc, k) in enumerate((("Z2", "Z3", "Z4", "Z5", "Z0", "K4"), ("Z6", "Z7", "Z8", "Z9", "Z1", "K5"))):
            L += ["VMOVUPS %d(SI), %s" % (64 * j, x), "VSUBPS Z31, %s, %s" % (x, x)]
            L += exp(V, x, n, r, pp, k=k, cr=cr, u8=True)
            L += ["VADDPS %s, %s, %s" % (x, acc, acc), "VMULPS Z18, %s, %s" % (x, x), "VMINPS %s, Z18, %s" % (x, x), "VCVTPS2DQ %s, %s" % (x, x),
                  "VPMAXSD Z19, %s, %s" % (x, x), "VPMOVUSDB %s, X%s" % (x, int(n[1:])), "VMOVDQU X%s, %d(DI)" % (int(n[1:]), 16 * j)]
        L += ["ADDQ $128, SI", "ADDQ $32, DI", "SUBQ $32, CX", "JMP %s_loop2" % name]
    else:
        L += ["VBROADCASTSS shift+24(FP), Y13", "VMOVUPS %s, Y15" % c("lo"), "VMOVUPS %s, Y14" % c("hi"),
              "VMOVUPS %s, Y11" % c("f255"), "VMOVDQU u8perm<>(SB), Y10",
              "VMOVUPS %s, Y0" % c("zero"), "VMOVUPS %s, Y1" % c("zero")]
    L += [name + "_loop:", "CMPQ CX, $16", "JLT %s_done" % name]
    if V == "Z":
        L += ["VMOVUPS (SI), Z2", "VSUBPS Z31, Z2, Z2"] + exp(V, "Z2", "Z3", "Z4", "Z5", cr=cr, u8=True) + [
            "VADDPS Z2, Z0, Z0", "VMULPS Z18, Z2, Z2", "VMINPS Z2, Z18, Z2", "VCVTPS2DQ Z2, Z2", "VPMAXSD Z19, Z2, Z2",
            "VPMOVUSDB Z2, X3", "VMOVDQU X3, (DI)"]
    else:
        L += ["VMOVUPS (SI), Y2", "VSUBPS Y13, Y2, Y2"] + exp(V, "Y2", "Y3", "Y4", "Y5", u8=True) + \
            ["VMOVUPS 32(SI), Y6", "VSUBPS Y13, Y6, Y6"] + exp(V, "Y6", "Y7", "Y8", "Y9", u8=True) + [
            "VADDPS Y2, Y0, Y0", "VADDPS Y6, Y1, Y1", "VMULPS Y11, Y2, Y2", "VMULPS Y11, Y6, Y6",
            "VMINPS Y2, Y11, Y2", "VMINPS Y6, Y11, Y6",
            "VCVTPS2DQ Y2, Y2", "VCVTPS2DQ Y6, Y6", "VPACKSSDW Y6, Y2, Y2", "VPACKUSWB Y2, Y2, Y2",
            "VPERMD Y2, Y10, Y2", "VMOVDQU X2, (DI)"]
    L += ["ADDQ $64, SI", "ADDQ $16, DI", "SUBQ $16, CX", "JMP %s_loop" % name, name + "_done:"]
    if V == "Z":
        L += ["VADDPS Z1, Z0, Z0"]
    L += fold(V, "VADDPS") + ["MOVSS X0, ret+32(FP)", "VZEROUPPER", "RET"]
    return "\n".join(l if l.endswith(":") or l.startswith("//") or l.startswith("TEXT") or l == "" else "\t" + l for l in L)


def emit_rotate_half(V):
    """rotateHalf: one rotary row in the rotate-half layout, y[i] = x[i]·c[i] − x[i+h]·s[i]
    and y[i+h] = x[i+h]·c[i+h] + x[i]·s[i] for i < n, n ≤ h a multiple of the vector width
    (rotateHalfGeneric is the Go statement): each product and the sum or difference rounded
    to float32 (no FMA), as the unfused Mul and Add steps round them; a + (−b) is a − b."""
    suf = "512" if V == "Z" else "256"
    name = "rotateHalf" + suf
    w = 16 if V == "Z" else 8
    L = ["", "// func %s(y, x, c, s *float32, h, n int)" % name,
         "TEXT ·%s(SB), NOSPLIT, $0-48" % name,
         "MOVQ y+0(FP), DI", "MOVQ x+8(FP), SI", "MOVQ c+16(FP), DX", "MOVQ s+24(FP), R8",
         "MOVQ h+32(FP), R9", "SHLQ $2, R9",  # the upper half, h values on, in bytes
         "MOVQ n+40(FP), CX", "TESTQ CX, CX", "JEQ %s_done" % name, name + "_loop:"]
    r = [R(V, i) for i in range(6)]
    L += [
        "VMOVUPS (SI), %s" % r[0],  # x[i]
        "VMOVUPS (SI)(R9*1), %s" % r[1],  # x[i+h]
        "VMULPS (DX), %s, %s" % (r[0], r[2]),  # x[i]·c[i]
        "VMULPS (R8), %s, %s" % (r[1], r[3]),  # x[i+h]·s[i]
        "VSUBPS %s, %s, %s" % (r[3], r[2], r[2]),
        "VMOVUPS %s, (DI)" % r[2],
        "VMULPS (DX)(R9*1), %s, %s" % (r[1], r[4]),  # x[i+h]·c[i+h]
        "VMULPS (R8)(R9*1), %s, %s" % (r[0], r[5]),  # x[i]·s[i+h]
        "VADDPS %s, %s, %s" % (r[5], r[4], r[4]),
        "VMOVUPS %s, (DI)(R9*1)" % r[4],
    ]
    L += ["ADDQ $%d, %s" % (4 * w, p) for p in ("SI", "DX", "R8", "DI")]
    L += ["SUBQ $%d, CX" % w, "JNE %s_loop" % name, name + "_done:", "VZEROUPPER", "RET"]
    return "\n".join(l if l.endswith(":") or l.startswith("//") or l.startswith("TEXT") or l == "" else "\t" + l for l in L)


def emit_acc_f64(V):
    """accF64: acc[i] += float64(x[i]) for i < n, n a multiple of the vector width
    (accF64Generic is the Go statement): the conversion is exact and each sum rounded once
    to float64, as Go's float64 addition rounds it."""
    suf = "512" if V == "Z" else "256"
    name = "accF64" + suf
    w = 16 if V == "Z" else 8  # floats a step
    L = ["", "// func %s(acc *float64, x *float32, n int)" % name,
         "TEXT ·%s(SB), NOSPLIT, $0-24" % name,
         "MOVQ acc+0(FP), DI", "MOVQ x+8(FP), SI", "MOVQ n+16(FP), CX",
         "TESTQ CX, CX", "JEQ %s_done" % name, name + "_loop:"]
    hb = w * 2  # bytes of half a step's floats
    L += [
        "VCVTPS2PD (SI), %s0" % V,
        "VCVTPS2PD %d(SI), %s1" % (hb, V),
        "VADDPD (DI), %s0, %s0" % (V, V),
        "VADDPD %d(DI), %s1, %s1" % (2 * hb, V, V),
        "VMOVUPD %s0, (DI)" % V,
        "VMOVUPD %s1, %d(DI)" % (V, 2 * hb),
    ]
    L += ["ADDQ $%d, SI" % (4 * w), "ADDQ $%d, DI" % (8 * w)]
    L += ["SUBQ $%d, CX" % w, "JNE %s_loop" % name, name + "_done:", "VZEROUPPER", "RET"]
    return "\n".join(l if l.endswith(":") or l.startswith("//") or l.startswith("TEXT") or l == "" else "\t" + l for l in L)


def main():
    print("// Code generated by internal/asmgen.py; DO NOT EDIT.\n")
    print("//go:build amd64 && !purego\n")
    print('#include "textflag.h"\n')
    print(data())
    for k in KERNELS:
        for V in ("Z", "Y"):
            if k.name == "max":
                k.init = ["KXORW K3, K3, K3"] if V == "Z" else ["VXORPS Y10, Y10, Y10"]
            print(emit(k, V))
    for V in ("Z", "Y"):
        print(emit_expsum_u8(V))
    for V in ("Z", "Y"):
        print(emit_rotate_half(V))
    for V in ("Z", "Y"):
        print(emit_acc_f64(V))


if __name__ == "__main__":
    main()
