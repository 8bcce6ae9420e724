// Greedy decoding with libllama as ../shared/reference/README.md describes
// (tokenize with BOS and special tokens, the prompt in one batch, then one
// token per decode, argmax), printing the logits of every step as JSON lines.
// --force feeds the given tokens instead of the argmax (teacher forcing);
// --dump DIR writes every F32/F16 tensor the graph computes, as float32, to
// DIR/DD_SSSS.f32 (decode DD, node SSSS) with DIR/index.txt naming them.
// Build against a llama.cpp build tree (see README.md).
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sstream>

static int g_decode = 0;
static std::string g_dumpdir;
static int g_dump_decode = -1;
static int g_seq = 0;

static bool cb(struct ggml_tensor * t, bool ask, void *) {
    if (g_dumpdir.empty() || (g_dump_decode >= 0 && g_decode != g_dump_decode)) return ask ? false : true;
    if (ask) return true;
    std::vector<float> out(ggml_nelements(t));
    if (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16) {
        std::vector<uint8_t> raw(ggml_nbytes(t));
        ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
        // dump contiguous view by strides
        int64_t i = 0;
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
            size_t off = i0*t->nb[0] + i1*t->nb[1] + i2*t->nb[2] + i3*t->nb[3];
            if (off >= raw.size()) { out[i++] = 0; continue; }
            if (t->type == GGML_TYPE_F32) { float f; memcpy(&f, raw.data()+off, 4); out[i++] = f; }
            else { ggml_fp16_t h; memcpy(&h, raw.data()+off, 2); out[i++] = ggml_fp16_to_fp32(h); }
        }
    } else {
        return true;
    }
    char path[1024];
    int seq = g_seq++;
    snprintf(path, sizeof path, "%s/%02d_%04d.f32", g_dumpdir.c_str(), g_decode, seq);
    FILE * f = fopen(path, "wb");
    if (f) { fwrite(out.data(), 4, out.size(), f); fclose(f); }
    snprintf(path, sizeof path, "%s/index.txt", g_dumpdir.c_str());
    f = fopen(path, "a");
    if (f) { fprintf(f, "%02d %04d %s|%s %s %lld %lld %lld %lld\n", g_decode, seq, t->name, ggml_op_desc(t), ggml_type_name(t->type),
        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]); fclose(f); }
    return true;
}

int main(int argc, char ** argv) {
    std::string model, prompt; int n = 24; int threads = 2; std::vector<int> force;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-m") model = argv[++i];
        else if (a == "-p") prompt = argv[++i];
        else if (a == "-n") n = atoi(argv[++i]);
        else if (a == "-t") threads = atoi(argv[++i]);
        else if (a == "--force") { std::stringstream ss(argv[++i]); int x; while (ss >> x) { force.push_back(x); if (ss.peek()==',') ss.ignore(); } }
        else if (a == "--dump") g_dumpdir = argv[++i];
        else if (a == "--dump-decode") g_dump_decode = atoi(argv[++i]);
    }
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    auto mp = llama_model_default_params();
    llama_model * m = llama_model_load_from_file(model.c_str(), mp);
    if (!m) { fprintf(stderr, "load failed\n"); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(m);
    auto cp = llama_context_default_params();
    cp.n_ctx = 512; cp.n_threads = threads; cp.n_threads_batch = threads;
    cp.cb_eval = cb; cp.cb_eval_user_data = nullptr;
    llama_context * ctx = llama_init_from_model(m, cp);
    std::vector<llama_token> toks(prompt.size() + 8);
    int nt = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), true, true);
    toks.resize(nt);
    int nv = llama_vocab_n_tokens(vocab);
    printf("{\"prompt_tokens\":[");
    for (int i = 0; i < nt; i++) printf("%s%d", i ? "," : "", toks[i]);
    printf("]}\n");
    std::vector<llama_token> cur = toks;
    for (int step = 0; step < n; step++) {
        llama_batch b = llama_batch_get_one(cur.data(), cur.size());
        if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
        g_decode++; g_seq = 0;
        const float * lg = llama_get_logits_ith(ctx, -1);
        int best = 0; for (int i = 1; i < nv; i++) if (lg[i] > lg[best]) best = i;
        printf("{\"step\":%d,\"chosen\":%d,\"logits\":[", step, best);
        for (int i = 0; i < nv; i++) printf("%s%.9g", i ? "," : "", lg[i]);
        printf("]}\n");
        llama_token next = step < (int)force.size() ? force[step] : best;
        if (step >= (int)force.size() && llama_vocab_is_eog(vocab, best)) break;
        cur.assign(1, next);
    }
    llama_free(ctx); llama_model_free(m);
    return 0;
}
