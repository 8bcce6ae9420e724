// Package gorgonia runs the model families (llama, qwen2, qwen3, phi3,
// gemma2, gemma3) as Gorgonia graphs in F32: a second forward pass, independent of the native backend's kernels but for
// the dequantizers that read the weights, which serves (it implements
// backends.Backend, registered as "gorgonia") and checks the native one;
// and, through Gorgonia's symbolic differentiation, the trainer of LoRA
// adapters with the base model frozen (SFT, DPO, Margin, KTO objectives, Adam),
// including MicroLoRA adapters trained online from feedback.
//
// It is the only package that imports gorgonia.org/gorgonia (v0.9.18, the
// last release; it runs on Go 1.26 with go4.org/unsafe/assume-no-moving-gc
// at its latest version). Of Gorgonia we rely on: ExprGraph and input
// nodes holding tensor.Dense values; MatMul (Mul of two matrices),
// element-wise Add, HadamardProd, Square, InverseSqrt, Sigmoid, Tanh, Log,
// LogSoftMax/SoftMax along an axis, Slice, Concat, Transpose and Sum; Grad
// (symbolic differentiation) and the TapeMachine that runs a graph and its
// gradients; and the Op and SDOp interfaces for our own ops (attention,
// frozen linear layers, ggml's table GELU). Broadcasting is written as
// outer products rather than with Gorgonia's broadcast ops. Adam is our
// own, so that its moments are saved with an adapter. Every graph also
// runs in float64, in which the gradient check (gradcheck_test.go)
// compares its gradients with finite differences.
package gorgonia
