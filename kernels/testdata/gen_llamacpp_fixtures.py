#!/usr/bin/env python3
"""Writes llamacpp_ops.json (here) and ../../backends/native/testdata/
llamacpp_activations.json from tensor dumps of llama.cpp and from glibc.
See README.md. Usage:
    gen_llamacpp_fixtures.py DUMP_TOOL OUT_OPS_JSON OUT_ACTIVATIONS_JSON
with SHARED pointing at the test data directory (default: ../shared beside
the repository) and the compiled glibc_sincos.c as ./sincos beside this
script; WORK (default: a new temporary directory) keeps the dumps."""
import array, base64, json, os, struct, subprocess, sys, tempfile

tool, out_kernels, out_native = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
shared = os.environ.get('SHARED', os.path.join(here, '..', '..', '..', 'shared'))
work = os.environ.get('WORK') or tempfile.mkdtemp()
os.makedirs(work, exist_ok=True)

def dump(model, prompt, steps, force):
    d = os.path.join(work, f'{model}-{steps}')
    if not os.path.exists(os.path.join(d, 'index.txt')):
        os.makedirs(d, exist_ok=True)
        subprocess.run([tool, '-m', f'{shared}/models/mini/{model}.gguf', '-p', prompt, '-n', str(steps),
                        '--force', ','.join(map(str, force)), '--dump', d], check=True, stdout=subprocess.DEVNULL)
    idx = []
    for line in open(os.path.join(d, 'index.txt')):
        dec, seq, rest = line.rstrip('\n').split(' ', 2)
        name, tail = rest.rsplit('|', 1)
        f = tail.split()
        idx.append((int(dec), seq, name, f[0], [int(x) for x in f[2:6]]))
    def get(dec, name, op, k=0):
        hits = [e for e in idx if e[0] == dec and e[2] == name and e[3] == op]
        e = hits[k]
        a = array.array('f')
        with open(os.path.join(d, f'{dec:02d}_{e[1]}.f32'), 'rb') as fh:
            a.frombytes(fh.read())
        return list(a), e[4]
    return get

def b64(xs):
    return base64.b64encode(array.array('f', xs).tobytes()).decode()

def ref(model, prompt='once-upon-a-time'):
    r = json.load(open(f'{shared}/reference/{model}/{prompt}.logits.json'))
    return r['prompt'], [s['chosen'] for s in r['steps']]

NOUT = 32  # outputs kept per product
dots = []
def dot_case(model, tensor, in_name, out_name, batched_rows=0):
    prompt, chosen = ref(model)
    get = dump(model, prompt, 2, chosen[:1])
    x, ne = get(1, in_name, 'MUL')
    y, _ = get(1, out_name, 'MUL_MAT')
    dots.append({'model': model + '.gguf', 'tensor': tensor, 'batched': False, 'x': b64(x), 'want': b64(y[:NOUT])})
    if batched_rows:
        x, ne = get(0, in_name, 'MUL')
        y, yne = get(0, out_name, 'MUL_MAT')
        r = 1  # one row of the prompt
        dots.append({'model': model + '.gguf', 'tensor': tensor, 'batched': True,
                     'x': b64(x[r*ne[0]:(r+1)*ne[0]]), 'want': b64(y[r*yne[0]:r*yne[0]+NOUT])})

for m in ['mini-llama-F32', 'mini-llama-F16', 'mini-llama-BF16']:
    dot_case(m, 'blk.0.attn_q.weight', 'attn_norm-0', 'Qcur-0', batched_rows=1)
for m in ['mini-llama-Q8_0', 'mini-llama-Q4_0', 'mini-llama-Q4_1', 'mini-llama-Q5_0', 'mini-llama-Q5_1',
          'mini-llama-Q2_K', 'mini-llama-Q3_K_M', 'mini-llama-Q4_K-pure', 'mini-llama-Q5_K_M', 'mini-llama-Q6_K-pure']:
    dot_case(m, 'blk.0.attn_q.weight', 'attn_norm-0', 'Qcur-0')
for m in ['mini-llama-Q4_0', 'mini-llama-Q4_K-pure', 'mini-llama-Q5_K_M', 'mini-llama-F16']:
    dot_case(m, 'blk.0.ffn_down.weight', 'ffn_gate_par-0', 'ffn_out-0')

# Element-wise ops, from a longer decode of the Q8_0 model.
prompt, chosen = ref('mini-llama-Q8_0')
STEPS = 18
get = dump('mini-llama-Q8_0', prompt, STEPS, chosen[:STEPS - 1])
dec = STEPS - 1
npos = 5 + dec  # positions the last token sees (5 prompt tokens)
lout0, _ = get(dec, 'l_out-0', 'ADD')
an1, _ = get(dec, 'attn_norm-1', 'MUL')
norm1, _ = get(dec, 'norm-1', 'RMS_NORM')
gate, _ = get(dec, 'ffn_gate-0', 'MUL_MAT')
up, _ = get(dec, 'ffn_up-0', 'MUL_MAT')
par, _ = get(dec, 'ffn_gate_par-0', 'MUL')
silu, _ = get(dec, 'ffn_silu-0', 'SILU')
kq, kqne = get(dec, 'kq-0', 'MUL_MAT')
sm, _ = get(dec, 'kq_soft_max_ext-0', 'SOFT_MAX')
qpre, _ = get(dec, 'Qcur-0', 'MUL_MAT')
qrope, _ = get(dec, 'Qcur-0', 'ROPE')
scale = struct.unpack('f', struct.pack('f', 1 / struct.unpack('f', struct.pack('f', 32 ** 0.5))[0]))[0]
heads = kqne[2]
softmax = []
for h in range(heads):
    row = kq[h * kqne[0]:h * kqne[0] + kqne[0]]
    softmax.append({'x': b64([struct.unpack('f', struct.pack('f', v * scale))[0] for v in row[:npos]]),
                    'want': b64(sm[h * kqne[0]:h * kqne[0] + npos])})

pq, cq = ref('mini-qwen2-F32')
getq = dump('mini-qwen2-F32', pq, 4, cq[:3])
qq, _ = getq(3, 'Qcur-0', 'ADD')
qqr, _ = getq(3, 'Qcur-0', 'ROPE')

fx = {
    'source': 'llama.cpp c392e509 (AVX2, FMA, F16C; no AVX-512) on the mini models of ../shared; glibc 2.36 x86-64',
    'dots': dots,
    'rms_norm': {'model': 'mini-llama-Q8_0.gguf', 'weight': 'blk.1.attn_norm.weight', 'x': b64(lout0), 'want': b64(an1)},
    'silu': {'x': b64(gate[:256]), 'want': b64(silu[:256])},
    'swiglu': {'gate': b64(gate[:256]), 'up': b64(up[:256]), 'want': b64(par[:256])},
    'softmax': softmax,
    'rope': [
        {'neox': False, 'base': 10000, 'dims': 32, 'head_dim': 32, 'pos': npos - 1, 'x': b64(qpre), 'want': b64(qrope)},
        {'neox': True, 'base': 1000000, 'dims': 32, 'head_dim': 32, 'pos': 5 + 2, 'x': b64(qq), 'want': b64(qqr)},
    ],
}
# glibc sinf/cosf at the branch limits and across magnitudes, as (x, sin, cos) bits.
sc = subprocess.run([os.path.join(here, 'sincos')], capture_output=True, text=True, check=True).stdout.split()
fx['sincos'] = [[int(sc[i], 16), int(sc[i+1], 16), int(sc[i+2], 16)] for i in range(0, len(sc), 3)]
json.dump(fx, open(out_kernels, 'w'), indent=1)

# Activations of the whole forward pass for backends/native: the first 16
# values of every tapped point, prompt and first decode step.
gq = dump('mini-llama-Q8_0', prompt, STEPS, chosen[:STEPS - 1])
points = []
names = [('inp_embd', 'GET_ROWS', -1)]
for l in range(4):
    L = f'-{l}'
    names += [('attn_norm' + L, 'MUL', l), ('Qcur' + L, 'MUL_MAT', l), ('Kcur' + L, 'MUL_MAT', l), ('Vcur' + L, 'MUL_MAT', l),
              ('Qcur' + L, 'ROPE', l), ('Kcur' + L, 'ROPE', l), ('kqv_merged_cont' + L, 'CONT', l), ('kqv_out' + L, 'MUL_MAT', l),
              ('ffn_inp' + L, 'ADD', l), ('ffn_norm' + L, 'MUL', l), ('ffn_gate' + L, 'MUL_MAT', l), ('ffn_up' + L, 'MUL_MAT', l),
              ('ffn_gate_par' + L, 'MUL', l), ('ffn_out' + L, 'MUL_MAT', l), ('l_out' + L, 'ADD', l)]
names += [('result_norm', 'MUL', -1), ('result_output', 'MUL_MAT', -1)]
for dd in (0, 1):
    for name, op, l in names:
        v, ne = gq(dd, name, op)
        rows = len(v) // ne[0] if op != 'ROPE' else ne[2]
        last = v[len(v) - len(v) // rows:]  # the last token's values
        points.append({'decode': dd, 'name': name, 'op': op, 'rows': rows, 'last': b64(last[:16])})
json.dump({'source': fx['source'], 'model': 'mini-llama-Q8_0.gguf', 'prompt_tokens': json.load(open(f'{shared}/reference/mini-llama-Q8_0/once-upon-a-time.logits.json'))['prompt_tokens'],
           'next_token': chosen[0], 'points': points}, open(out_native, 'w'), indent=1)
