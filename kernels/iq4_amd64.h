// Macros of the table formats' kernels (IQ4_NL, IQ4_XS, MXFP4): a block's
// 16 nibble bytes become 32 indices (low nibbles to the low lane: weights
// 0-15; high nibbles to the high lane: 16-31), which VPSHUFB turns into the
// signed values of the format's table; they multiply the int8 activations
// through VPMADDUBSW as |w|·(a·sign w), and VPMADDWD widens the int16 pair
// sums to 8 int32 lanes. No int16 pair sum saturates: |w| ≤ 127 and the
// activations are within ±127.

// NIBBLES4X expands the 16 bytes at m into 32 indices in Yq; Ymask holds
// 0x0f bytes; clobbers Xt.
#define NIBBLES4X(m, Xq, Yq, Xt, Ymask) \
	VMOVDQU     m, Xq; \
	VPSRLW      $4, Xq, Xt; \
	VINSERTI128 $1, Xt, Yq, Yq; \
	VPAND       Ymask, Yq, Yq

// TABLEROW sets Yd to the 8 int32 lane sums of one block of a table
// format (nibbles at m) against the activations Ya: Y13 the table in both
// lanes, Y14 0x0f bytes, Y15 int16 ones; clobbers Xt/Yt.
#define TABLEROW(m, Xd, Yd, Ya, Xt, Yt) \
	NIBBLES4X(m, Xd, Yd, Xt, Y14); \
	VPSHUFB    Yd, Y13, Yd; \
	VPSIGNB    Yd, Ya, Yt; \
	VPSIGNB    Yd, Yd, Yd; \
	VPMADDUBSW Yt, Yd, Yd; \
	VPMADDWD   Y15, Yd, Yd

// TABLESETUP loads Y15 (int16 ones), Y14 (0x0f bytes) and Y13 (the table
// tab in both lanes).
#define TABLESETUP(tab) \
	VPCMPEQW       Y15, Y15, Y15; \
	VPSRLW         $15, Y15, Y15; \
	MOVL           $0x0f0f0f0f, AX; \
	VMOVD          AX, X14; \
	VPBROADCASTD   X14, Y14; \
	VBROADCASTI128 tab, Y13

// REDUCEROWS sets X5 to the sums of Y5, Y6, Y7, Y8 (row i in lane i);
// clobbers Y6, Y7.
#define REDUCEROWS \
	VPHADDD      Y6, Y5, Y5; \
	VPHADDD      Y8, Y7, Y7; \
	VPHADDD      Y7, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X6; \
	VPADDD       X6, X5, X5
