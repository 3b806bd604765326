#!/usr/bin/python3
"""Regenerates the golden .npy files with numpy itself (np.save), so the Go writer is
checked byte for byte against numpy's output. Run from this directory:
    /usr/bin/python3 make_golden.py
"""
import numpy as np

np.save("f32_2x3.npy", np.array([[0, 1.5, -2], [3.25, float("inf"), -0.0]], dtype="<f4"))
np.save("i64_4.npy", np.array([0, 1, -1, 2**62], dtype="<i8"))
np.save("b1_2x2.npy", np.array([[True, False], [False, True]]))
np.save("f32_scalar.npy", np.float32(7.0))
np.save("i32_0x3.npy", np.zeros((0, 3), dtype="<i4"))
np.save("f16_3.npy", np.array([1, -2.5, 65504], dtype="<f2"))
np.save("i8_3.npy", np.array([-128, 0, 127], dtype="|i1"))
np.save("u8_3.npy", np.array([0, 1, 255], dtype="|u1"))
# Read only (zoo reads float64 as float32, rounded to nearest): 0.1 rounds to float32(0.1).
np.save("f64_2.npy", np.array([0.1, -1e300], dtype="<f8"))
# .npz archives: one stored, one deflated; members named as the arrays.
np.savez("two.npz", x=np.array([[1.5, -2], [0, 3]], dtype="<f4"), ids=np.array([7, 8, 9], dtype="<i8"))
np.savez_compressed("zeros_compressed.npz", z=np.zeros((64, 64), dtype="<f2"))
