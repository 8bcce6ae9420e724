// Q4K_SCALES unpacks the 6-bit scales and mins of the Q4_K super-block at
// SI (u0, u1, u2: its 12 scale bytes as little-endian words): R8 gets the 8
// scales as bytes (0-3 = u0 & 0x3f.., 4-7 = u2 & 0x0f.. | (u0>>6 & 0x03..)<<4),
// R9 the 8 mins (0-3 = u1 & 0x3f.., 4-7 = u2>>4 & 0x0f.. | (u1>>6 & 0x03..)<<4).
// Clobbers AX, BX, DX, R10.
#define Q4K_SCALES \
	MOVL 4(SI), AX; \
	MOVL 8(SI), BX; \
	MOVL 12(SI), DX; \
	MOVL AX, R8; \
	ANDL $0x3f3f3f3f, R8; \
	MOVL BX, R9; \
	ANDL $0x3f3f3f3f, R9; \
	MOVL DX, R10; \
	ANDL $0x0f0f0f0f, R10; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL  AX, R10; \
	SHRL $4, DX; \
	ANDL $0x0f0f0f0f, DX; \
	SHRL $6, BX; \
	ANDL $0x03030303, BX; \
	SHLL $4, BX; \
	ORL  BX, DX; \
	SHLQ $32, R10; \
	ORQ  R10, R8; \
	SHLQ $32, DX; \
	ORQ  DX, R9
