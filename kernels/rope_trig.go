package kernels

import "math"

// sinf and cosf as glibc computes them on x86-64 (the FMA build its ifunc
// picks on every AVX2 CPU), because ggml takes its RoPE angles' sines and
// cosines from C's sinf and cosf and greedy parity with llama.cpp needs
// them to the bit; glibc's are not correctly rounded (up to 0.56 ulp).
//
// The algorithm is Arm's optimized-routines one that glibc uses: in float64,
// reduce x by π/2 (one fused multiply-subtract for |x| < 120, a 4/π table of
// 192 bits above), then a degree-6 (cosine) or degree-7 (sine) polynomial
// in the reduced argument, each multiply feeding an add fused with it.

// trigCoeffs are the constants of one polynomial set; the second set negates
// the cosine polynomial, which gives the sign of quadrants 2 and 3 for free.
type trigCoeffs struct {
	c0, c1, c2, c3, c4 float64 // cosine
	s1, s2, s3         float64 // sine
}

var trigTable = [2]trigCoeffs{
	{
		c0: 1, c1: math.Float64frombits(0xbfdffffffd0c621c), c2: math.Float64frombits(0x3fa55553e1068f19),
		c3: math.Float64frombits(0xbf56c087e89a359d), c4: math.Float64frombits(0x3ef99343027bf8c3),
		s1: math.Float64frombits(0xbfc555545995a603), s2: math.Float64frombits(0x3f81107605230bc4),
		s3: math.Float64frombits(0xbf2994eb3774cf24),
	},
	{
		c0: -1, c1: math.Float64frombits(0x3fdffffffd0c621c), c2: math.Float64frombits(0xbfa55553e1068f19),
		c3: math.Float64frombits(0x3f56c087e89a359d), c4: math.Float64frombits(0xbef99343027bf8c3),
		s1: math.Float64frombits(0xbfc555545995a603), s2: math.Float64frombits(0x3f81107605230bc4),
		s3: math.Float64frombits(0xbf2994eb3774cf24),
	},
}

var (
	trigSign   = [4]float64{1, -1, -1, 1}                 // sign of the sine in quadrants 0-3
	trigHPIInv = math.Float64frombits(0x41645f306dc9c883) // 2/π·2^24: the quadrant lands in bits 24-31
	trigHPI    = math.Float64frombits(0x3ff921fb54442d18) // π/2
	trigPI63   = math.Float64frombits(0x3c1921fb54442d18) // 2π·2^-64
	trigPIO4   = math.Float32frombits(0x3f490fdb)         // π/4 as a float32
	trigTiny   = math.Float32frombits(0x39800000)         // 2^-12
	trigInvPi4 = [24]uint32{                              // 4/π to 192 bits, 8 new bits an entry
		0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
		0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
		0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
	}
)

// abstop12 is the exponent field of x with the sign cleared (and 1 bit of
// the mantissa), which orders magnitudes coarsely.
func abstop12(x float32) uint32 { return math.Float32bits(x) >> 20 & 0x7ff }

// trigPoly evaluates the sine polynomial (n even) or the cosine polynomial
// (n odd) at x, with x2 = x².
func trigPoly(x, x2 float64, p *trigCoeffs, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := math.FMA(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := math.FMA(x3, p.s1, x)
		return float32(math.FMA(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := math.FMA(x2, p.c4, p.c3)
	c1 := math.FMA(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := math.FMA(x4, p.c2, c1)
	return float32(math.FMA(x6, c2, c))
}

// reduceFast returns x modulo π/2 in [−π/4, π/4] and the quadrant, for
// |x| < 120 (one multiply-subtract by a 55-bit π/2 is enough there).
func reduceFast(x float64) (float64, int) {
	r := x * trigHPIInv
	n := (int32(r) + 0x800000) >> 24
	return math.FMA(-float64(n), trigHPI, x), int(n)
}

// reduceLarge is reduceFast for |x| ≥ 120, from the float's bits (the sign
// ignored): a 32×96-bit product with 4/π gives the exact 2.62 fixed-point
// remainder.
func reduceLarge(xi uint32) (float64, int) {
	arr := trigInvPi4[xi>>26&15:]
	shift := xi >> 23 & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0]) // a 32-bit product, as in C
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * trigPI63, int(n)
}

// sinf is glibc's sinf on x86-64 with FMA.
func sinf(y float32) float32 {
	x := float64(y)
	top := abstop12(y)
	switch {
	case top < abstop12(trigPIO4):
		if top < abstop12(trigTiny) {
			return y
		}
		return trigPoly(x, x*x, &trigTable[0], 0)
	case top < abstop12(120):
		x, n := reduceFast(x)
		s := trigSign[n&3]
		return trigPoly(x*s, x*x, &trigTable[n>>1&1], n)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		x, n := reduceLarge(xi)
		q := n + int(xi>>31)
		return trigPoly(x*trigSign[q&3], x*x, &trigTable[q>>1&1], n)
	}
	return float32(math.NaN())
}

// cosf is glibc's cosf on x86-64 with FMA.
func cosf(y float32) float32 {
	x := float64(y)
	top := abstop12(y)
	switch {
	case top < abstop12(trigPIO4):
		if top < abstop12(trigTiny) {
			return 1
		}
		return trigPoly(x, x*x, &trigTable[0], 1)
	case top < abstop12(120):
		x, n := reduceFast(x)
		s := trigSign[n&3]
		return trigPoly(x*s, x*x, &trigTable[n>>1&1], n^1)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		x, n := reduceLarge(xi)
		q := n + int(xi>>31)
		return trigPoly(x*trigSign[q&3], x*x, &trigTable[q>>1&1], n^1)
	}
	return float32(math.NaN())
}
