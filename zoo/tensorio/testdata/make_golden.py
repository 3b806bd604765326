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
