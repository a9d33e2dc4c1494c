/* vkrt-service's command line: the usage text and the parse into struct service_args. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "llama.h"
#include "service.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-service --weights FILE.gguf [--tokens T] [--seconds S] [--hidden H] [--layers L]\n"
          "                    [--ffn F] [--devices N] [--warmup-ms MS] [--seed N] [--verbose]\n"
          "                    [--fault import-fails] [--import-chunk-cap BYTES]\n"
          "                    [--activations f32|q8|f16|q8,f16]\n"
          "                    [--load-path auto|mapped|read|direct|memcpy] [--json]\n"
          "                    [--lab NAME=VALUE]... [--fuse auto|all|norm|swiglu|none]\n"
          "                    [--fuse-rope on|off]\n"
          "                    [--convert f32|f16]\n"
          "       vkrt-service --make-gguf FILE --layers L --hidden H [--ffn F]\n"
          "                    [--dtype f32|f16|q8_0|q4_K|q6_K] [--seed N]   (--make-weights: the same)\n"
          "       vkrt-service --make-gguf FILE --preset llama3-8b|llama3.2-1b|qwen2.5-7b\n"
          "                    [--dtype f16|q8_0|q4_K|q6_K|q4_K_M|q4_0|q4_1|q5_0|q5_1|q2_K|q3_K|\n"
          "                             q5_K|bf16] [--vocab V]\n"
          "                    [--vocab-type spm|gpt2] [--seed N]\n"
          "       vkrt-service --make-gguf FILE --layers L --hidden H --ffn F --heads N\n"
          "                    [--kv-heads N] [--vocab V] [--vocab-type spm|gpt2] [--dtype ...]\n"
          "                    [--rope-freqs F] [--rope-linear F] [--seed N]\n"
          "--preset or --heads writes a whole llama model (attention, norms, a vocabulary of V\n"
          "tokens, default the preset's or 32000) with random weights; without them the file\n"
          "holds the MLP tensors only. --layers/--hidden/--ffn/--heads/--kv-heads override the\n"
          "preset's. --vocab-type spm (the default): a SentencePiece vocabulary\n"
          "(tokenizer.ggml.model llama); gpt2: a byte-level BPE one as Llama 3's (model gpt2,\n"
          "pre llama-bpe: the 256 byte characters, pieces built by tokenizer.ggml.merges,\n"
          "<|begin_of_text|> BOS, <|end_of_text|> EOS and <|eot_id|> EOT last).\n"
          "q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q5_K, bf16: every matrix of a ggml type libvkrt has\n"
          "no kernels for (random blocks); --weights converts them on the host when the model\n"
          "loads: q4_0 and q5_0 into q8_0, the others into f32, every value as ggml gives it\n"
          "(--convert f16: into f16, half the memory, each value rounded to f16).\n"
          "q4_K_M: q4_K with q6_K where llama.cpp's Q4_K_M puts it (the output head, attn_v and\n"
          "ffn_down of the first and last eighth of the layers and every third between).\n"
          "--rope-freqs F writes rope_freqs.weight, RoPE scaled as Llama 3.1 does (factor F: 8\n"
          "for 3.1, 32 for 3.2, the llama3.2-1b preset's; 0: none); --rope-linear F writes\n"
          "llama.rope.scaling.type linear with factor F (every angle divided by F).\n"
          "--hidden/--layers/--ffn with --weights (an MLP stack or a llama model) check the file's\n"
          "shapes: a mismatch is an error; --dtype/--preset/--heads/--kv-heads/--vocab/\n"
          "--vocab-type are --make-gguf's only.\n"
          "The file is GGUF v3 with llama-style blk.N.ffn_gate/ffn_up/ffn_down.weight tensors;\n"
          "--seed with --weights picks the token inputs. --tokens defaults to 64, or with --seconds\n"
          "to as many as run in S seconds (up to 10^6). --activations q8: quantized weights take x\n"
          "rounded to 8 bits per 32 values where the device can (vkrt_options.quant_activations),\n"
          "and a q8_0 K/V cache's attention on the row kernel its queries; the MLP mode's float64\n"
          "reference rounds x the same way (a llama model's does not). --activations f16: a llama\n"
          "prompt's batched matmuls (M at or past the device's crossover) take x and w rounded to\n"
          "f16 on cooperative matrices (vkrt_options.matmul_activations =\n"
          "VKRT_MATMUL_ACTIVATIONS_F16); refused, exit 5, on a device without them\n"
          "(VK_NV_cooperative_matrix, 32-wide subgroups) or a build without their kernels\n"
          "(CONFIG_VKRT_KERNEL_MATMUL_COOPMAT). The float64 reference keeps\n"
          "f32 inputs: a position whose top-1/top-2 margin is within the rounding may differ\n"
          "(--verify 0 for speed runs). The MLP stack runs one column at a time: unaffected.\n"
          "A llama model (a file with token_embd.weight, general.architecture llama) generates text\n"
          "(its tokenizer: SentencePiece, tokenizer.ggml.model llama, or GPT-2 byte-level BPE,\n"
          "model gpt2 with Llama 3's pre-tokenizer, tokenizer.ggml.pre llama-bpe; special tokens\n"
          "such as <|eot_id|> written in the prompt are taken as themselves; generation stops at\n"
          "EOS or EOT):\n"
          "  vkrt-service --weights MODEL.gguf [--prompt TEXT] [--tokens N] [--temperature T]\n"
          "               [--top-k K] [--top-p P] [--sampler device|host] [--seed N] [--ctx N]\n"
          "               [--kv-type f16|q8_0]\n"
          "               [--print-ids] [--stream] [--verify all|N] [--graph on|off] [--devices N]\n"
          "               [--depth D] [--prompt-tokens N] [--prompt-mode batch|token] [--ubatch N]\n"
          "from BOS without a prompt; --temperature 0 (the default) is greedy, on the device.\n"
          "A temperature alone is drawn on the device too (vkrt_op_sample: Gumbel noise from a\n"
          "key the seeded generator gives each token); with --top-k up to 64 the device gives\n"
          "each token's k best logits (vkrt_op_top_k) and the host draws among them (top-p among\n"
          "the k too); with --top-p alone, a larger top-k, or --sampler host, the host draws from\n"
          "the downloaded logits.\n"
          "--print-ids adds the lines 'prompt ids: ...' and 'ids: ...'. --stream writes each generated\n"
          "token's text to stderr as soon as it is chosen (stdout keeps the whole text's line).\n"
          "--verify N: the first N\n"
          "positions are checked against the float64 reference (teacher-forced; default all).\n"
          "--graph off records every token's work instead of launching it captured once; when\n"
          "capturing fails the service says why and records every token's work too (--fault\n"
          "capture-fails provokes that: a capture already open refuses the token's).\n"
          "--load-path: how vkrt_load_file brings the weights (default auto: per device, mapped\n"
          "where file pages import, else pread or O_DIRECT by the page cache's share of the file).\n"
          "--load-knobs T,CHUNK,CHUNKS[,BLOCK[,PACK[,AFTER[,NOIMG[,BATCH]]]]] (a build with the lab):\n"
          "the load's helper threads, pinned chunk size and count, read block size (0 or left out: the\n"
          "board's), PACK: rows of split tensors narrower than PACK bytes packed by the host for\n"
          "the DMA (0 or left out: 64 KiB; 1: none, one DMA region per row) and AFTER: 1 packs\n"
          "them once their whole chunk is read, 0 or left out by each reader right after its block;\n"
          "NOIMG 1 packs them even where a row image (one 2D copy per chunk) could take them;\n"
          "BATCH: chunks per submission, each device's in one vkQueueSubmit (0 or 1: each chunk).\n"
          "--lab NAME=VALUE (a build with the lab; up to 8): a knob of vkrt/vkrt_lab.h by its name\n"
          "without VKRT_LAB_ (any case), set on every device once the appliance is open, so one\n"
          "binary compares a path with another (e.g. --lab barrier_stages=1).\n"
          "--fuse auto|all|norm|swiglu|none (llama models): a token's f16, f32 and q4_K (with\n"
          "--activations q8 also q8_0) q/k/v, gate/up and output products take the RMS norm\n"
          "before them (norm) and gate/up the swiglu after them (swiglu) in their own dispatch\n"
          "(vkrt_op_matmul_fused), up to three dependent\n"
          "steps fewer per layer; other types, separate q/k/v or gate/up, and prompt batches as\n"
          "separate ops. auto (the default): the swiglu, and the norm: f16 and f32 at any\n"
          "hidden size, q4_K where it is at most 4096 (the kernel stages the normalized x in\n"
          "shared memory up to there; measured: beyond, the norm costs more than it saves);\n"
          "with --activations q8 the fused kernel is the 8-bit-x one, which rounds x g (not\n"
          "the normalized x): the norm up to a hidden size of 16384.\n"
          "--fuse-rope on|off (llama models, default on): a token's q/k/v product (q4_K or\n"
          "q8_0 q/k/v in one matrix, --activations q8, heads of a multiple of 32) also turns q\n"
          "and K by RoPE and writes the K and V cache rows in its own dispatch\n"
          "(vkrt_matmul_fusion.qkv): attention follows the product directly, one dependent\n"
          "step and three ops fewer per layer (an H100: Llama-3-8B q4_K +3 %% tg, Llama-3.2-1B\n"
          "+6 %%); elsewhere, and with off, the separate ops.\n"
          "--profile (a build with the lab): after the run, one more token at the last position\n"
          "recorded directly with GPU timestamps around each op on device 0: its ops by name,\n"
          "count, time and share of the token.\n"
          "--time-without PREFIX[,PREFIX]... (a llama model): the ops whose names (--profile's)\n"
          "begin with one are left out of every record, the prompt's and the token's graph, so\n"
          "the times are the run's without them (e.g. --time-without attention: what the\n"
          "attention costs the token, barriers and all); the tokens are then wrong, --verify 0.\n"
          "The load's GB/s against a pinned upload (to dev0, and with several devices into all\n"
          "of them at once; measured after the run for a llama model, at start for the MLP\n"
          "stack), and the time from process\n"
          "start to the first generated token (with --warmup-ms 0: no warm-up before it) are\n"
          "printed, and with --json carried in the closing JSON object.\n"
          "--depth D: a speed run at context depth D: the first token goes to position D, the K/V\n"
          "rows before it hold a constant (not computed) and nothing is verified (llama-bench's\n"
          "'tg @ dD'); the context then needs D + prompt + tokens rows. --prompt-tokens N: the\n"
          "prompt is BOS and N - 1 ids drawn from the vocabulary with --seed (llama-bench's 'ppN').\n"
          "--prompt-mode batch (the default) runs the prompt in ubatches of up to --ubatch N\n"
          "tokens (default 512), each one pass of N columns through the matrix kernels; token\n"
          "feeds it one token at a time through the generation's work.\n"
          "Exit status: 1 a check failed, 2 usage, 3 a bad weights or model file, 4 a device or\n"
          "runtime error, 5 a good model that these devices or options cannot run (the split).\n"
          "Other files: the synthetic SwiGLU MLP stack (--make-gguf), a matmul/allreduce load.\n");
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return false;
  *out = v;
  return true;
}

static bool parse_dtype(const char *v, vkrt_type *out) {
  for (int t = 0; t < VKRT_TYPE_COUNT; t++)
    if (!strcasecmp(v, vkrt_type_str((vkrt_type)t))) {
      *out = (vkrt_type)t;
      return true;
    }
  return false;
}

/* One option with its value v: false when v is not a valid value of a, or a is unknown. */
static bool parse_option(struct service_args *o, const char *a, const char *v) {
  if (!strcmp(a, "--weights")) {
    o->weights_path = v;
    return true;
  }
  if (!strcmp(a, "--make-gguf") || !strcmp(a, "--make-weights")) {
    o->make_path = v;
    return true;
  }
  if (!strcmp(a, "--warmup-ms")) {
    o->warmup_ms = atof(v);
    return o->warmup_ms >= 0;
  }
  if (!strcmp(a, "--seconds")) {
    o->seconds = atof(v);
    return o->seconds > 0;
  }
  if (!strcmp(a, "--fault")) {
    o->fault_import |= !strcmp(v, "import-fails");
    o->fault_capture |= !strcmp(v, "capture-fails");
    return !strcmp(v, "import-fails") || !strcmp(v, "capture-fails");
  }
  if (!strcmp(a, "--tokens")) {
    o->tokens_given = true;
    return parse_u64(v, &o->tokens) && o->tokens > 0;
  }
  if (!strcmp(a, "--layers"))
    return parse_u64(v, &o->layers) && o->layers > 0;
  if (!strcmp(a, "--hidden"))
    return parse_u64(v, &o->hidden) && o->hidden > 0;
  if (!strcmp(a, "--ffn"))
    return parse_u64(v, &o->ffn) && o->ffn > 0;
  if (!strcmp(a, "--seed"))
    return parse_u64(v, &o->seed);
  if (!strcmp(a, "--devices"))
    return parse_u64(v, &o->devices) && o->devices >= 1 && o->devices <= VKRT_MAX_DEVICES;
  if (!strcmp(a, "--dtype")) {
    o->q4_k_m = !strcmp(v, "q4_K_M");
    o->foreign = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT && !o->q4_k_m; t++) {
      vkrt_type to;
      if (gguf_foreign_target(t, false, &to) && !strcasecmp(v, gguf_ggml_type_str(t)))
        return o->foreign = t, o->dtype = to, true;
    }
    return o->q4_k_m ? (o->dtype = VKRT_TYPE_Q4_K, true) : parse_dtype(v, &o->dtype);
  }
  if (!strcmp(a, "--activations")) {
    o->q8_activations = !strcmp(v, "q8") || !strcmp(v, "q8,f16");
    o->f16_activations = !strcmp(v, "f16") || !strcmp(v, "q8,f16");
    return o->q8_activations || o->f16_activations || !strcmp(v, "f32");
  }
  if (!strcmp(a, "--prompt")) {
    if (o->prompt_tokens)
      return false; /* one prompt: text or drawn ids */
    o->prompt = v;
    return true;
  }
  if (!strcmp(a, "--ctx"))
    return parse_u64(v, &o->ctx) && o->ctx > 0 && o->ctx <= INT32_MAX;
  if (!strcmp(a, "--prompt-tokens"))
    return !o->prompt && parse_u64(v, &o->prompt_tokens) && o->prompt_tokens > 0 &&
           o->prompt_tokens < INT32_MAX;
  if (!strcmp(a, "--prompt-mode")) {
    o->prompt_by_token = !strcmp(v, "token");
    return o->prompt_by_token || !strcmp(v, "batch");
  }
  if (!strcmp(a, "--ubatch"))
    return parse_u64(v, &o->ubatch) && o->ubatch > 0 && o->ubatch <= 65536;
  if (!strcmp(a, "--depth"))
    return parse_u64(v, &o->depth) && o->depth < INT32_MAX;
  if (!strcmp(a, "--kv-type"))
    return parse_dtype(v, &o->kv_type) && (o->kv_type == VKRT_TYPE_F16 || o->kv_type == VKRT_TYPE_Q8_0);
  if (!strcmp(a, "--temperature")) {
    o->temperature = atof(v);
    return o->temperature >= 0;
  }
  if (!strcmp(a, "--top-k"))
    return parse_u64(v, &o->top_k);
  if (!strcmp(a, "--top-p")) {
    o->top_p = atof(v);
    return o->top_p > 0 && o->top_p <= 1;
  }
  if (!strcmp(a, "--sampler")) {
    o->host_sampler = !strcmp(v, "host");
    return o->host_sampler || !strcmp(v, "device");
  }
  if (!strcmp(a, "--graph")) {
    o->no_graph = !strcmp(v, "off");
    return o->no_graph || !strcmp(v, "on");
  }
  if (!strcmp(a, "--verify")) {
    o->verify_given = true;
    return !strcmp(v, "all") ? (o->verify = UINT64_MAX, true) : parse_u64(v, &o->verify);
  }
  if (!strcmp(a, "--preset")) {
    o->preset = v;
    struct llama_make_params p;
    return llama_preset(v, &p);
  }
  if (!strcmp(a, "--heads"))
    return parse_u64(v, &o->heads) && o->heads > 0 && o->heads <= UINT32_MAX;
  if (!strcmp(a, "--kv-heads"))
    return parse_u64(v, &o->kv_heads) && o->kv_heads > 0 && o->kv_heads <= UINT32_MAX;
  if (!strcmp(a, "--rope-freqs")) {
    o->rope_factor = (float)atof(v);
    return o->rope_factor == 0 || (o->rope_factor >= 1 && o->rope_factor <= 1024);
  }
  if (!strcmp(a, "--rope-linear")) {
    o->rope_linear = (float)atof(v);
    return o->rope_linear == 0 || (o->rope_linear >= 1 && o->rope_linear <= 1024);
  }
  if (!strcmp(a, "--vocab"))
    return parse_u64(v, &o->vocab) && o->vocab > 0 && o->vocab <= UINT32_MAX;
  if (!strcmp(a, "--vocab-type")) {
    o->vocab_type_given = true;
    o->vocab_type = !strcmp(v, "gpt2") ? LLAMA_VOCAB_BPE : LLAMA_VOCAB_SPM;
    return !strcmp(v, "gpt2") || !strcmp(v, "spm");
  }
  if (!strcmp(a, "--load-path")) {
    for (int p = 0; p < VKRT_LOAD_PATH_COUNT; p++)
      if (!strcmp(v, vkrt_load_path_str((vkrt_load_path)p)))
        return o->load_path = (vkrt_load_path)p, true;
    return !strcmp(v, "import") ? (o->load_path = VKRT_LOAD_PATH_MAPPED, true) : false;
  }
  if (!strcmp(a, "--load-knobs")) {
    o->load_knobs = v;
    return true; /* parsed where the appliance is open (appliance.c) */
  }
  if (!strcmp(a, "--fuse-rope")) {
    o->fuse_rope = !strcmp(v, "on");
    return o->fuse_rope || !strcmp(v, "off");
  }
  if (!strcmp(a, "--fuse")) {
    for (unsigned i = 0; i < 5; i++)
      if (!strcmp(v, llama_fuse_names[i]))
        return o->fuse = i == 4 ? LLAMA_FUSE_AUTO : i, true;
    return false;
  }
  if (!strcmp(a, "--convert")) {
    o->convert_f16 = !strcmp(v, "f16");
    return o->convert_f16 || !strcmp(v, "f32");
  }
  if (!strcmp(a, "--time-without")) {
    o->time_without = v;
    return *v != 0;
  }
  if (!strcmp(a, "--lab")) { /* set where the appliance is open (appliance.c) */
    if (o->labs == (int)(sizeof(o->lab) / sizeof(o->lab[0])))
      return false;
    o->lab[o->labs++] = v;
    return true;
  }
  if (!strcmp(a, "--import-chunk-cap"))
    return parse_u64(v, &o->chunk_cap) && o->chunk_cap > 0;
  return false;
}

bool args_parse(int argc, char **argv, struct service_args *o, int *exit_status) {
  *o = (struct service_args){.fuse = LLAMA_FUSE_AUTO, .fuse_rope = true, .tokens = 64, .seed = 1234, .warmup_ms = 500, .dtype = VKRT_TYPE_F16,
                             .kv_type = VKRT_TYPE_F16, .top_p = 1, .verify = UINT64_MAX, .rope_factor = -1,
                             .ubatch = 512};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      *exit_status = 0;
      return false;
    }
    if (!strcmp(a, "--version")) {
      printf("vkrt-service %s (board %s)\n", vkrt_version(),
             vkrt_config_value("CONFIG_VKRT_BOARD"));
      *exit_status = 0;
      return false;
    }
    /* the options without a value */
    const struct { const char *name; bool *set; } flags[] = {
        {"--json", &o->json},     {"--verbose", &o->verbose},         {"--print-ids", &o->print_ids},
        {"--stream", &o->stream}, {"--profile", &o->profile}};
    bool flag = false;
    for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]) && !flag; f++)
      if (!strcmp(a, flags[f].name))
        *flags[f].set = flag = true;
    if (flag)
      continue;
    if (!strcmp(a, "--dtype") || !strcmp(a, "--preset") || !strcmp(a, "--heads") ||
        !strcmp(a, "--kv-heads") || !strcmp(a, "--vocab") || !strcmp(a, "--vocab-type") ||
        !strcmp(a, "--rope-freqs") || !strcmp(a, "--rope-linear"))
      o->make_only = o->make_only ? o->make_only : a;
    if (!v || !parse_option(o, a, v)) {
      fprintf(stderr, "vkrt-service: bad or incomplete argument '%s%s%s'\n", a, v ? " " : "", v ? v : "");
      usage(stderr);
      *exit_status = EXIT_USAGE;
      return false;
    }
    i++;
  }
  if (o->seconds > 0 && !o->tokens_given)
    o->tokens = SECONDS_MAX_TOKENS; /* --seconds alone: the time ends the run */
  if (o->time_without && o->profile) {
    fprintf(stderr, "vkrt-service: --time-without and --profile: one at a time (the profile "
            "times every op, the other leaves some out)\n");
    *exit_status = EXIT_USAGE;
    return false;
  }
  if ((o->depth || o->time_without) && o->verify_given && o->verify) {
    fprintf(stderr, "vkrt-service: %s: nothing can be checked against float64: drop --verify "
            "or give --verify 0\n", o->depth ? "--depth fills the K/V rows before the first "
            "token with a constant" : "--time-without leaves ops out, so the tokens are wrong");
    *exit_status = EXIT_USAGE;
    return false;
  }
  if (o->depth || o->time_without)
    o->verify = 0;
  if (!o->make_path && !o->weights_path) {
    usage(stderr);
    *exit_status = EXIT_USAGE;
    return false;
  }
  if (!o->make_path && o->make_only) {
    fprintf(stderr, "vkrt-service: %s describes a file --make-gguf writes; with --weights the file "
                    "has its own (leave %s out)\n", o->make_only, o->make_only);
    *exit_status = EXIT_USAGE;
    return false;
  }
  return true;
}
