"""Every command-line flag of bert_tf, each defined once, and the groups the commands define.

A command module defines the groups it reads in its `define_flags()`, called by its `run()`
before parsing; importing a module defines nothing, so all commands import into one process.
The groups are idempotent per FlagValues: a second command in the same process re-uses a flag
the first defined, with the second command's default. Names follow the original
google-research/bert scripts where one exists.

Reading a flag: find its `_flag(...)` line below for its type, default and help, then the
command's `define_flags()` for the default that command gives it (a few differ: e.g.
--max_seq_length is none for fine-tuning, export and embedding: the run's, else a default).
"""

import ast
import glob
import os
import re

from absl import flags

FLAGS = flags.FLAGS

# name -> (define function, default, help, keyword arguments): one entry per flag.
_DEFINITIONS = {}


def _flag(define, name, default, help_text, **kwargs):
    assert name not in _DEFINITIONS, name  # one definition per name
    _DEFINITIONS[name] = (define, default, help_text, kwargs)


class _Constant:
    """A library constant (the choices of an enum flag) read when a flag is defined.

    It must be a literal assigned at the top of its module, and is read from the module's source
    without importing it: the modules that own these constants load TensorFlow, and neither
    importing this module nor defining a command's flags (`--help`) may.
    """

    def __init__(self, module, name):
        self.module, self.name = module, name

    def get(self):
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.join(package, *self.module.split(".")[1:]) + ".py"
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and getattr(node.targets[0], "id", None) == self.name):
                return ast.literal_eval(node.value)
        raise LookupError(f"{self.module} assigns no literal {self.name} at its top level")


def define(names, flag_values=FLAGS, **defaults):
    """Defines the flags `names` in `flag_values` unless there; `defaults` override the table's.

    A flag that is already defined (another command in this process) gets this command's
    default, so the command running sees its own defaults.
    """
    for name in names:
        define_fn, default, help_text, kwargs = _DEFINITIONS[name]
        default = defaults.pop(name, default)
        if name in flag_values:
            if flag_values[name].default != default:
                flag_values.set_default(name, default)
            continue
        kwargs = {k: v.get() if isinstance(v, _Constant) else v for k, v in kwargs.items()}
        define_fn(name, default, help=help_text, flag_values=flag_values, **kwargs)
    if defaults:
        raise KeyError(f"defaults for flags not in the group: {sorted(defaults)}")


def to_config(config_class, flag_values=FLAGS, unset=(), **overrides):
    """A job's config (a dataclass, or a training job's config of task, trainer and runtime
    sections: bert_tf.jobs.sections) with each setting from the flag of the same name.

    The one place a command's flags become the typed config its driver takes.

    Args:
      config_class: the dataclass; every setting not in `overrides` names a flag.
      flag_values: the parsed flags.
      unset: settings that are None unless their flag was given: the driver then chooses the
        value (e.g. an unset --max_predictions_per_seq follows packed input).
      **overrides: setting values that come from elsewhere (a flag of another name, e.g. --from).
    """
    from bert_tf.jobs.sections import field_names, from_flat

    values = {}
    for name in field_names(config_class):
        if name in overrides:
            continue
        flag = flag_values[name]
        values[name] = None if name in unset and not flag.present else flag.value
    values.update(overrides)
    return from_flat(config_class, **values)


def record_resolved(values, flag_values=FLAGS):
    """Sets each flag of `values` ({name: value}) that was left unset to the value the job
    resolved it to (e.g. from the model's run), so the run's flagfile (`flagfile_text`) holds
    what the run used and a rerun from it uses the same."""
    for name, value in values.items():
        if name in flag_values and flag_values[name].value is None and value is not None:
            flag_values[name].value = value


def flagfile_text(define_flags, flag_values=FLAGS):
    """A command's parsed flags as the flagfile a run records (<command>.flags): each flag
    `define_flags` (the command's define_flags) defines, one `--name=value` a line, by name,
    relative paths made absolute (`_absolute_paths`). absl's, TensorFlow's and other
    commands' flags are left out, so the file is a --flagfile the command reads back, from any
    directory."""
    names = sorted(define_flags(flags.FlagValues()))
    lines = []
    for name in names:
        value = flag_values[name].value
        if value is None:
            continue
        absolute = _absolute_paths(name, value)
        lines.append(flag_values[name].serialize() if absolute == value
                     else f"--{name}={absolute}")
    return "".join(line + "\n" for line in lines)


# The path flags whose value is a comma-separated list of globs.
_PATH_LISTS = ("input_file", "eval_input_file", "input_text_file", "eval_input_text_file")


def _absolute_paths(name, value):
    """A path flag's value (a name ending in _file or _dir, or --init_checkpoint) with its
    local relative path (each of a _PATH_LISTS flag's) made absolute: a directory, and a file,
    glob or checkpoint prefix that exists (--init_checkpoint may name a preset instead).
    Other values as they are."""
    if not (name.endswith(("_file", "_dir")) or name == "init_checkpoint") or not isinstance(
            value, str):
        return value
    parts = []
    for part in value.split(",") if name in _PATH_LISTS else [value]:
        local = part and "://" not in part and not os.path.isabs(part)
        if local and (name.endswith("_dir") or glob.glob(part) or glob.glob(part + ".*")):
            part = os.path.abspath(part)
        parts.append(part)
    return ",".join(parts)


class _JitCompileParser(flags.ArgumentParser):
    syntactic_help = "true, false or auto"

    def parse(self, argument):
        # Values already canonical (the defaults) need no parsing: defining the flag, as --help
        # does, imports no TensorFlow.
        if argument is True or argument is False or argument == "auto":
            return argument
        from bert_tf.training.precision import parse_jit_compile

        return parse_jit_compile(argument)

    def flag_type(self):
        return "string"


class _JitCompileSerializer(flags.ArgumentSerializer):
    def serialize(self, value):
        return "auto" if value == "auto" else str(bool(value)).lower()


class JitCompileFlag(flags.Flag):
    """--jit_compile=true|false|auto; bare --jit_compile and --nojit_compile still work."""

    def __init__(self, name, default, help_string):
        super().__init__(_JitCompileParser(), _JitCompileSerializer(), name, default,
                         help_string, boolean=True)

    def _serialize(self, value):
        # A boolean flag would write "auto" as a bare --jit_compile (= true).
        if value is None:
            return ""
        return f"--{self.name}={self.serializer.serialize(value)}"


def _define_jit_compile(name, default, help, flag_values):  # noqa: A002 (absl's name)
    flags.DEFINE_flag(JitCompileFlag(name, default, help), flag_values)


_ESCAPES = {"t": "\t", "s": " ", "\\": "\\"}


class _SeparatorParser(flags.ArgumentParser):
    """A string in which \\t stands for a tab, \\s for a space and \\\\ for a backslash.

    absl strips each flagfile line, so a run's recorded flagfile can only keep a separator
    such as ' ' or a tab written as an escape; any other backslash is kept as it is.
    """
    syntactic_help = "a string (\\t a tab, \\s a space)"

    def parse(self, argument):
        if argument is None:
            return None
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), argument)

    def flag_type(self):
        return "string"


class _SeparatorSerializer(flags.ArgumentSerializer):
    def serialize(self, value):
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace(" ", "\\s")


def _define_separator(name, default, help, flag_values):  # noqa: A002 (absl's name)
    flags.DEFINE(_SeparatorParser(), name, default, help, flag_values,
                 serializer=_SeparatorSerializer())


# Model and vocabulary files.
_flag(flags.DEFINE_string, "bert_config_file", None,
      "bert_config.json of the model (default: the one beside --init_checkpoint, or the "
      "configuration the checkpoint records; bert-tf-convert-checkpoint: the one beside "
      "--checkpoint, read with --from=tf1, albert (albert_config.json) or bert_tf).")
_flag(flags.DEFINE_string, "vocab_file", None,
      "WordPiece vocabulary (vocab.txt); where a model is read, default: the one beside it. "
      "The fine-tuning commands, bert-tf-embed, bert-tf-extract-features, "
      "bert-tf-create-pretraining-data and bert-tf-pretrain also take a tokenizer.json "
      "(byte-level BPE, e.g. ModernBERT's) or a SentencePiece .model (e.g. ALBERT's "
      "30k-clean.model).")
_flag(flags.DEFINE_bool, "do_lower_case", True,
      "Lower-case the input and strip accents (True for uncased models, False for cased ones). "
      "Unset with a tokenizer.json: the file's own casing (a vocab.txt or SentencePiece "
      ".model: True); bert-tf-convert-checkpoint: the casing --checkpoint records, if any.")
_flag(flags.DEFINE_string, "init_checkpoint", None,
      "Pre-trained weights: a bert_tf checkpoint or run directory, a .keras or .weights.h5 "
      "file, an original TF1 checkpoint prefix, or a Hugging Face or keras-hub directory.")
_flag(flags.DEFINE_integer, "max_seq_length", 128,
      "Tokens per input after WordPiece, [CLS]/[SEP] included. Fine-tuning, unset: the length "
      "recorded by the run the model comes from (--output_dir's, else --init_checkpoint's), "
      "else 128 (SQuAD: 384); bert-tf-embed, unset: the model's (its run's or "
      "sentence_bert_config.json), else 128.")

# Runtime: devices, distribution, precision, compilation, loop.
_flag(flags.DEFINE_enum, "distribution_strategy", "one_device", "tf.distribute strategy.",
      enum_values=_Constant("bert_tf.training.distribute", "STRATEGIES"))
_flag(flags.DEFINE_integer, "num_gpus", 0, "GPUs for one_device / mirrored.")
_flag(flags.DEFINE_string, "tpu", None, "TPU name or address for --distribution_strategy=tpu.")
_flag(flags.DEFINE_bool, "use_tpu", False, "Same as --distribution_strategy=tpu.")
_flag(flags.DEFINE_string, "tpu_name", None, "TPU name or address (with --use_tpu).")
_flag(flags.DEFINE_enum, "dtype", "float32",
      "Compute dtype policy. mixed_bfloat16 (TPUs, recent CPUs and GPUs) and mixed_float16 "
      "(GPUs; adds dynamic loss scaling) keep variables, LayerNorm, softmax and the losses in "
      "float32. auto: mixed_bfloat16 on TPUs and GPUs; on CPUs the fastest measured for the CPU's "
      "type (mixed_bfloat16 with AVX512_BF16/AMX, else float32; docs/benchmarks.md).",
      enum_values=_Constant("bert_tf.training.precision", "DTYPE_CHOICES"))
_flag(_define_jit_compile, "jit_compile", "auto",
      "XLA-compile the forward and backward pass: true, false or auto (on for TPUs and GPUs; on "
      "CPUs only for the CPU types and dtypes where it measured faster, docs/benchmarks.md).")
_flag(flags.DEFINE_integer, "gradient_accumulation_steps", 1,
      "Batches (of the batch-size flag) per optimizer step, their gradients averaged: the "
      "effective batch is N x the batch size.")
_flag(flags.DEFINE_integer, "seed", None, "Seed for initialisation, input shuffling and masking.")
_flag(flags.DEFINE_integer, "steps_per_loop", 100, "Optimizer steps per host round trip.")
_flag(flags.DEFINE_integer, "iterations_per_loop", None, "Original name of --steps_per_loop.")
_flag(flags.DEFINE_integer, "log_steps", None,
      "Log and write summaries every N steps (default: --steps_per_loop).")

# Training (pre-training and fine-tuning).
_flag(flags.DEFINE_string, "output_dir", None,
      "Directory the command writes: the run of bert-tf-pretrain, the fine-tuning commands and "
      "bert-tf-embed (checkpoints, summaries, models, predictions, results); the converted "
      "model (bert-tf-convert-checkpoint: the files of --to); the demo data "
      "(bert-tf-prepare-demo-data).")
_flag(flags.DEFINE_bool, "do_train", False, "Run training.")
_flag(flags.DEFINE_bool, "do_eval", False,
      "Evaluate (fine-tuning: on the dev set; pre-training: on --eval_input_file / "
      "--eval_input_text_file, else on the training input).")
_flag(flags.DEFINE_integer, "train_batch_size", 32, "Global training batch size.")
_flag(flags.DEFINE_integer, "eval_batch_size", 8, "Global evaluation batch size.")
_flag(flags.DEFINE_float, "learning_rate", 5e-5, "Peak learning rate.")
_flag(flags.DEFINE_integer, "save_checkpoints_steps", None,
      "Save a checkpoint every N steps (fine-tuning: and, with --do_eval, evaluate and keep "
      "the best model; default once per epoch).")
_flag(flags.DEFINE_enum, "optimizer", "adamw",
      "adamw (the original's), lamb, or stable_adamw (ModernBERT's: AdamW with per-tensor update "
      "clipping, beta_2 0.98).",
      enum_values=_Constant("bert_tf.training.optimization", "OPTIMIZER_TYPES"))
_flag(flags.DEFINE_enum, "lr_schedule", "linear",
      "linear: warmup, then linear decay to 0 (the original's); wsd: warmup, the peak rate, "
      "then a 1 - sqrt decay to 0 over the last --decay_proportion of the steps "
      "(warmup-stable-decay, ModernBERT's).",
      enum_values=_Constant("bert_tf.training.optimization", "LR_SCHEDULES"))
_flag(flags.DEFINE_float, "decay_proportion", 0.1,
      "--lr_schedule=wsd: fraction of the training steps the final decay takes.")
_flag(flags.DEFINE_float, "weight_decay_rate", 0.01, "Weight decay of kernels and embeddings.")
_flag(flags.DEFINE_bool, "adam_bias_correction", False,
      "--optimizer=adamw: Adam's bias correction, as Keras, PyTorch and Hugging Face apply it "
      "(the first steps smaller: 1/3 to 1/6 of the original's in a 100-step run). Default off, "
      "the original BERT rule; lamb and stable_adamw always correct.")
_flag(flags.DEFINE_float, "adam_beta1", 0.9,
      "Decay of the optimizer's first moment (Adam's beta_1; all three optimizers).")
_flag(flags.DEFINE_float, "adam_beta2", None,
      "Decay of the optimizer's second moment (Adam's beta_2). Default: 0.999, the original's "
      "(0.98 for stable_adamw, ModernBERT's); RoBERTa and Cramming train with 0.98.")
_flag(flags.DEFINE_float, "adam_epsilon", 1e-6,
      "The optimizer's epsilon, added to the root of the second moment (the original's 1e-6).")
_flag(flags.DEFINE_float, "clip_norm", 1.0,
      "Clip the all-reduced gradients to this global norm (the original's 1.0); 0: no clipping.")

# Pre-training: input.
_flag(flags.DEFINE_string, "input_file", None,
      "Input: pre-training TFRecords (bert-tf-pretrain) or text (bert-tf-create-pretraining-"
      "data, bert-tf-build-vocab), comma-separated globs; one file of inputs to encode "
      "(bert-tf-extract-features: one per line, 'a ||| b' a pair; bert-tf-embed: one text per "
      "line, or a CSV, TSV or JSONL file with --text_a_column).")
_flag(flags.DEFINE_string, "eval_input_file", None,
      "Held-out TFRecords for --do_eval: comma-separated globs.")
_flag(flags.DEFINE_string, "input_text_file", None,
      "Raw text (comma-separated globs; one sentence per line, blank line between documents) "
      "masked on the fly instead of --input_file.")
_flag(flags.DEFINE_string, "eval_input_text_file", None,
      "Held-out raw text for --do_eval (masked on the fly; needs --vocab_file).")
_flag(flags.DEFINE_string, "input_tfds", None,
      "Name of a TFDS text dataset already prepared under --tfds_data_dir (never downloaded), "
      "masked on the fly like --input_text_file: each example is a document, its lines the "
      "sentences.")
_flag(flags.DEFINE_string, "tfds_data_dir", None,
      "TFDS data_dir (nothing is downloaded): of --input_tfds (pre-training; default: TFDS's), "
      "or of glue/<task>, read instead of --data_dir (classification).")
_flag(flags.DEFINE_string, "tfds_split", "train", "Split of --input_tfds to train on.")
_flag(flags.DEFINE_string, "eval_tfds_split", None,
      "Split of --input_tfds to evaluate on (default: the training input).")
_flag(flags.DEFINE_string, "tfds_text_key", "text", "Text feature of the --input_tfds examples.")
_flag(flags.DEFINE_string, "tf_data_service", None,
      "grpc://HOST:PORT of a tf.data service dispatcher that runs the training input pipeline "
      "(see bert_tf.cli.pretrain).")
_flag(flags.DEFINE_enum, "backend", None,
      "The Keras backend to train on (default: KERAS_BACKEND, else tensorflow). jax: the JAX "
      "loop (every local GPU/TPU/CPU device, several hosts through --coordinator_address); "
      "the input pipelines stay TensorFlow's.",
      enum_values=_Constant("bert_tf.keras_setup", "SUPPORTED_BACKENDS"))
_flag(flags.DEFINE_string, "coordinator_address", None,
      "--backend=jax on several hosts: HOST:PORT of process 0 (jax.distributed); default: "
      "JAX_COORDINATOR_ADDRESS, or found by JAX on Cloud TPU and Slurm.")
_flag(flags.DEFINE_integer, "num_processes", None,
      "--backend=jax on several hosts: how many processes take part.")
_flag(flags.DEFINE_integer, "process_id", None,
      "--backend=jax on several hosts: this process's index, 0..num_processes-1.")

# Pre-training: schedule and objectives.
_flag(flags.DEFINE_integer, "num_train_steps", 100000, "Optimizer steps to train to.")
_flag(flags.DEFINE_integer, "num_warmup_steps", 10000, "Steps of linear learning-rate warmup.")
_flag(flags.DEFINE_string, "time_budget", None,
      "Train for this much wall-clock time (600s, 45m, 24h, 1h30m) instead of --num_train_steps: "
      "the learning-rate schedule follows the time spent and ends when it is up; the budget "
      "covers the whole command (evaluation and the model files included) and continues "
      "across a resume.")
_flag(flags.DEFINE_float, "batch_size_ramp", None,
      "Grow the batch during training (a batch-size ramp): 1 batch per optimizer step at the "
      "start, rising linearly to --gradient_accumulation_steps (>= 2) when this share (0, 1] of "
      "--num_train_steps or of --time_budget is done.")
_flag(flags.DEFINE_integer, "max_eval_steps", 100, "Maximum evaluation batches.")
_flag(flags.DEFINE_bool, "use_next_sentence_label", True, "Train the NSP head (False: MLM only).")
_flag(flags.DEFINE_bool, "span_boundary_objective", False,
      "SpanBERT's span-boundary objective, its loss added to the masked-LM loss. The input "
      "must carry span boundaries: --do_span_mask with raw text, or records made by "
      "create_pretraining_data --do_span_mask.")
_flag(flags.DEFINE_float, "bag_of_words_weight", 0.0,
      "Add a [CLS] bag-of-words loss with this weight (0: off): the masked-LM head, read at "
      "[CLS], predicts the words of its row, so the last layer's [CLS] vector summarises the "
      "text (a masked LM alone trains nothing into it). No new weights; not with "
      "--pack_sequences or --objective=electra.")
_flag(flags.DEFINE_bool, "full_sentences", False,
      "RoBERTa's FULL-SENTENCES packing of raw text: whole sentences across document ends, an "
      "extra [SEP] between documents (--input_text_file, --use_next_sentence_label=false).")
_flag(flags.DEFINE_enum, "objective", "mlm",
      "What pre-training trains: mlm = the masked LM (with the pair and span heads the other "
      "flags add), electra = ELECTRA's replaced-token detection: a small generator fills the "
      "masked positions and the encoder (the discriminator) learns which tokens were replaced "
      "(needs --use_next_sentence_label=false).",
      enum_values=_Constant("bert_tf.jobs.pretraining_config", "OBJECTIVES"))
_flag(flags.DEFINE_integer, "generator_hidden_size", None,
      "--objective=electra: the generator's width, at most the encoder's hidden_size; heads "
      "and intermediate size scale with it (default hidden_size / 4).")
_flag(flags.DEFINE_float, "discriminator_weight", 50.0,
      "--objective=electra: the weight of the discriminator loss in the combined loss "
      "(generator masked-LM loss + weight x discriminator loss; the paper's 50).")

# Masking recipe (pre-training records and raw text masked on the fly).
_flag(flags.DEFINE_integer, "max_predictions_per_seq", 20,
      "Maximum masked positions per instance; with --pack_sequences per row (each instance is "
      "capped by it too), default then floor(max_seq_length * masked_lm_prob) + "
      "ceil(max_instances_per_row / 2) + 1 for text, the records' own for packed TFRecords.")
_flag(flags.DEFINE_float, "masked_lm_prob", 0.15, "Fraction of tokens to mask.")
_flag(flags.DEFINE_float, "masked_lm_prob_end", None,
      "A falling (or rising) masking rate: raw text is masked at --masked_lm_prob at the start "
      "of training and at this rate at its end, linearly in between (the share of "
      "--num_train_steps done, or of --time_budget); unset: a constant rate. Size "
      "--max_predictions_per_seq for the larger rate. Raw-text input only (TFRecords hold "
      "their masks); evaluation masks at --masked_lm_prob.")
_flag(flags.DEFINE_bool, "do_whole_word_mask", False,
      "Mask all WordPiece pieces of a word together instead of pieces independently.")
_flag(flags.DEFINE_bool, "sentence_order_prediction", False,
      "ALBERT's sentence-order prediction: B always follows A in the text, and the two are "
      "swapped half the time (label 1 = swapped) instead of B being random text; the pair head "
      "learns it (needs --use_next_sentence_label). Pre-training TFRecords must be made so.")
_flag(flags.DEFINE_bool, "do_span_mask", False,
      "SpanBERT's span masking: mask spans of whole words with geometric lengths; records gain "
      "span_left_boundaries / span_right_boundaries for the span-boundary objective.")
_flag(flags.DEFINE_integer, "ngram_mask", 0,
      "ALBERT's n-gram masking (ALBERT: 3): mask n-grams of n = 1..N whole words, n drawn with "
      "probability proportional to 1/n; 0: off. Records stay plain (no span boundaries).")
_flag(flags.DEFINE_bool, "pack_sequences", False,
      "Packed rows: several whole instances (each still [CLS] A [SEP] B [SEP]) per row of "
      "--max_seq_length (docs/packing.md). Raw text is packed on the fly; pre-training "
      "TFRecords must be packed, which is detected without this flag too.")
_flag(flags.DEFINE_integer, "max_instances_per_row", 0,
      "Most instances in one packed row (--pack_sequences); 0 = max(2, max_seq_length // 16). "
      "Records carry their own.")

# Making pre-training records (bert-tf-create-pretraining-data, bert-tf-prepare-demo-data).
_flag(flags.DEFINE_string, "output_file", None,
      "File to write: bert-tf-create-pretraining-data: TFRecords, comma-separated (records go "
      "round-robin; with Beam, one shard prefix); bert-tf-build-vocab: vocab.txt, "
      "tokenizer.json or a SentencePiece .model (its directory must exist); "
      "bert-tf-extract-features: JSON lines; bert-tf-embed: the vectors, .npy (float32 "
      "[N, D]) or .jsonl.")
_flag(flags.DEFINE_integer, "random_seed", 12345, "Seed of every random choice.")
_flag(flags.DEFINE_integer, "dupe_factor", 10,
      "Times each document is used, with different masks each time.")
_flag(flags.DEFINE_float, "short_seq_prob", 0.1,
      "Probability of a shorter target length than max_seq_length for a document.")
_flag(flags.DEFINE_integer, "num_workers", 1,
      "Processes that tokenize and mask (local path). The output does not depend on it.")
_flag(flags.DEFINE_bool, "gzip", False,
      "Write GZIP-compressed records (output names must end in .gz).")
_flag(flags.DEFINE_enum, "feature_names", "v1",
      "Record feature names: v1 = the original's (input_ids, segment_ids), v2 = "
      "input_word_ids, input_type_ids.", enum_values=["v1", "v2"])
_flag(flags.DEFINE_integer, "documents_per_chunk", 1000,
      "Consecutive documents of the corpus (files in sorted order; a chunk may span files) "
      "processed together; random next segments are drawn from another document of the same "
      "chunk. At least 2.")
_flag(flags.DEFINE_integer, "shuffle_buffer_size", 100_000,
      "Records held in memory to shuffle the output order (local path).")
_flag(flags.DEFINE_float, "span_geometric_p", 0.2,
      "p of the geometric span-length distribution (--do_span_mask).")
_flag(flags.DEFINE_integer, "max_span_length", 10,
      "Longest masked span in words; the length distribution is truncated there "
      "(--do_span_mask).")
_flag(flags.DEFINE_bool, "use_beam", False, "Run as an Apache Beam pipeline (needs bert_tf[beam]).")
_flag(flags.DEFINE_string, "runner", None,
      "Beam runner (implies --use_beam); default DirectRunner.")
_flag(flags.DEFINE_integer, "beam_num_shards", 1,
      "Beam output shards, <output_file>-SSSSS-of-NNNNN (one writer each).")
_flag(flags.DEFINE_multi_string, "beam_pipeline_option", [],
      "Extra Beam pipeline option, repeatable, e.g. --beam_pipeline_option=--project=my-project.")

# Vocabulary (bert-tf-build-vocab, bert-tf-prepare-demo-data).
_flag(flags.DEFINE_integer, "vocab_size", None, "Target vocabulary size (an upper bound).")
_flag(flags.DEFINE_integer, "max_input_chars_per_word", 200,
      "Longer words (in characters) are not counted; the tokenizer's limit.")
_flag(flags.DEFINE_list, "reserved_tokens", [],
      "Extra tokens placed right after the special tokens.")
_flag(flags.DEFINE_integer, "max_unique_chars", 1000,
      "Alphabet size cap of the WordPiece learner.")
_flag(flags.DEFINE_enum, "tokenizer", "wordpiece",
      "What to learn: wordpiece = a BERT vocab.txt; bpe = a byte-level BPE tokenizer.json "
      "(ModernBERT / RoBERTa style: 256 byte characters, then merges); sentencepiece = a "
      "unigram SentencePiece model (ALBERT style; name it *.model).",
      enum_values=["wordpiece", "bpe", "sentencepiece"])
_flag(flags.DEFINE_integer, "min_frequency", 2,
      "--tokenizer=bpe: pairs seen fewer times than this are not merged.")

# Fine-tuning.
_flag(flags.DEFINE_bool, "do_predict", False, "Predict the test set.")
_flag(flags.DEFINE_bool, "allow_untrained_head", False,
      "--do_eval/--do_predict without --do_train and without fine-tuned weights: run with the "
      "task head --init_checkpoint lacks left randomly initialised (refused otherwise).")
_flag(flags.DEFINE_integer, "predict_batch_size", 8, "Prediction batch size.")
_flag(flags.DEFINE_float, "num_train_epochs", 3.0, "Passes over the training set.")
_flag(flags.DEFINE_float, "warmup_proportion", 0.1,
      "Fraction of training steps with linear learning-rate warmup (pre-training: of "
      "--time_budget; default there 0.1).")
_flag(flags.DEFINE_bool, "trainable_encoder", True,
      "False: freeze the encoder and train only the task head (feature-based).")
_flag(flags.DEFINE_string, "length_buckets", "auto",
      "Run batches of similar length at the smallest of these lengths that holds them instead "
      "of --max_seq_length: 'auto' (training: 16, 32, 48, 64, 96, 128, 192, 256, 384, 512 below "
      "--max_seq_length, then it; evaluation, prediction and serving, in length-sorted batches: "
      "4, 8, 12, 16, 24, ..., 64, 80, 96, 112, 128, 160, ...), 'off' (every batch padded to "
      "--max_seq_length, as the original does), or increasing lengths such as 16,32,64,128 "
      "(export: an empty value runs every request at --max_seq_length). Outputs and metrics "
      "are the same either way; short text trains and predicts several times faster.")
_flag(flags.DEFINE_string, "export_dir", None,
      "SavedModel version directory to write, with id, text and tf.Example serving "
      "signatures, e.g. models/mrpc/1 (TF Serving's --model_base_path is then models/mrpc); "
      "it must not exist yet, or be empty.")
_flag(flags.DEFINE_string, "data_dir", None,
      "Directory with the train/dev/test files (GLUE: as GLUE ships them).")
_flag(flags.DEFINE_string, "train_file", None,
      "Training file (default: the train file in --data_dir; SQuAD: JSON, e.g. "
      "train-v1.1.json; bert-tf-embed: pairs or triplets, CSV, TSV or JSONL).")
_flag(flags.DEFINE_string, "dev_file", None,
      "Evaluation file (default: the dev file in --data_dir; bert-tf-embed: pairs whose "
      "anchors are queries over the corpus of their positives).")
_flag(flags.DEFINE_string, "test_file", None,
      "File to predict (default: the test file in --data_dir). Classification also reads a "
      ".txt file of texts, one per line.")
_flag(flags.DEFINE_list, "labels", None,
      "The label (tag) names in logit order; other labels in the data are an error. Default: "
      "those of the training data, sorted (export: task_info.json's, else 0,1,...).")

# Classification (bert-tf-classify).
_flag(flags.DEFINE_string, "task_name", None,
      "A GLUE task (cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli) or any name "
      "for your own data (used in messages and results).")
_flag(flags.DEFINE_string, "text_a_column", None,
      "Your own data: the column (JSONL key) of the first text (bert-tf-embed: the anchor, "
      "default anchor/query/sentence1/text1; the text of a CSV, TSV or JSONL --input_file).")
_flag(flags.DEFINE_string, "text_b_column", None,
      "Your own data: the column of the second text, for sentence pairs (bert-tf-embed: the "
      "positive, default positive/passage/document/sentence2/text2).")
_flag(flags.DEFINE_string, "label_column", None,
      "Your own data: the label column (bert-tf-embed: the score of --dev_scored_file, "
      "default score/label/similarity; bert-tf-export: --eval_file's, default label).")
_flag(flags.DEFINE_string, "negative_column", None,
      "bert-tf-embed: the column of a hard negative (default negative/hard_negative, when "
      "the file has one).")
_flag(flags.DEFINE_bool, "regression", False,
      "Your own data: the label is a number to predict (one output, squared error) rather "
      "than a class.")
_flag(flags.DEFINE_bool, "multi_label", False,
      "Your own data: each example has any number of labels (none included), written in the "
      "label column joined by --label_separator (a JSONL value may be a list); one sigmoid "
      "per label, scored by micro-averaged F1.")
_flag(_define_separator, "label_separator", None,
      "--multi_label: the string between label names in the label column (and in "
      "predictions.tsv); \\t is a tab, \\s a space. Unset: the one recorded by the run "
      "evaluated, predicted with or resumed, else ','.")
_flag(flags.DEFINE_float, "multi_label_threshold", None,
      "A multi-label model (bert-tf-classify --multi_label) applies a label where its "
      "probability is above this, in (0, 1), in evaluation, predictions and exports (each "
      "evaluation reports the dev set's best). Unset: that of the run evaluated, predicted "
      "with, resumed or exported (its task_info.json), else 0.5.")

# Tagging (bert-tf-tag).
_flag(flags.DEFINE_integer, "token_column", 0, "Column of the token in the CoNLL files.")
_flag(flags.DEFINE_integer, "tag_column", -1,
      "Column of the tag (negative: from the end; CoNLL-2003's NER tag is -1).")

# SQuAD (bert-tf-squad; the answer settings also bert-tf-export).
_flag(flags.DEFINE_string, "predict_file", None,
      "SQuAD JSON to answer, e.g. dev-v1.1.json; with gold answers it is also evaluated (at "
      "every checkpoint when training).")
# The SQuAD settings a run records: unset (None), the model's run's (its run record or
# task_info.json), else run_squad's defaults (bert_tf.jobs.finetuning_config.RUN_DEFAULTS).
_flag(flags.DEFINE_integer, "doc_stride", None,
      "Pieces between the starts of consecutive windows. Unset: the run's, else 128.")
_flag(flags.DEFINE_integer, "max_query_length", None,
      "Question pieces kept (longer ones are cut). Unset: the run's, else 64.")
_flag(flags.DEFINE_integer, "n_best_size", 20,
      "Start/end candidates per window, and answers in nbest_predictions.json.")
_flag(flags.DEFINE_integer, "max_answer_length", None,
      "Longest answer, in tokens (WordPiece or BPE pieces). Unset: the run's, else 30.")
_flag(flags.DEFINE_bool, "version_2_with_negative", None,
      "SQuAD 2.0: questions may have no answer. Unset: that of the run evaluated, predicted "
      "with or resumed, else false.")
_flag(flags.DEFINE_float, "null_score_diff_threshold", None,
      "v2.0: answer \"\" when the null score minus the best span score exceeds this. Unset: "
      "that of the run evaluated, predicted with or exported, else 0.")
_flag(flags.DEFINE_bool, "verbose_logging", False,
      "Log why an answer could not be aligned back to the original text.")

# Export (bert-tf-export).
_flag(flags.DEFINE_string, "model_dir", None,
      "A run's output directory, a .keras file, or a Hugging Face directory of a model "
      "fine-tuned with transformers.")
_flag(flags.DEFINE_list, "signatures", ["ids", "text", "examples"],
      "Signatures to export: ids, text, examples.")
_flag(flags.DEFINE_bool, "text_pair", None,
      "Classification/regression: the text signature takes text_pair too (default: "
      "task_info.json's text_pair, else true).")
_flag(flags.DEFINE_integer, "top_k", 5, "Fill-mask: predictions per [MASK].")
_flag(flags.DEFINE_bool, "overwrite", False,
      "Replace an earlier output of the same kind: bert-tf-export's --export_dir (an export of "
      "the same --format), bert-tf-convert-checkpoint's --output_dir (a conversion to the same "
      "--to), the predictions of bert-tf-classify, -squad and -tag (its test_predictions.txt) in "
      "--output_dir (else kept: new ones are written as predictions-2.tsv, test_results-2.tsv, "
      "test_predictions-2.txt, predictions-2.json, ...). Nothing else is ever replaced.")
_flag(flags.DEFINE_enum, "format", "saved_model", "saved_model: a TF Serving version directory; "
      "litert: --export_dir/model.tflite (LiteRT, signatures serving_default and serve_text).",
      enum_values=["saved_model", "litert"])
_flag(flags.DEFINE_string, "quantize", "none",
      "--format=litert: none, float16, dynamic_int8, full_int8, or int8 (the fastest int8 mode "
      "within the accuracy target).")
_flag(flags.DEFINE_string, "calibration_file", None,
      "--format=litert: texts to calibrate full_int8 on and to compare quantized with float32 "
      "answers (one text per line, or .tsv/.csv/.jsonl with a sentence/text column).")
_flag(flags.DEFINE_string, "eval_file", None,
      "--format=litert --quantize: a labelled dev file (.tsv/.csv/.jsonl with a label column, "
      "--label_column): the accuracy of the float32 and the quantized model.")
_flag(flags.DEFINE_string, "check", None,
      "Instead of exporting: list the ops of this SavedModel directory and fail if the TF "
      "Serving model server lacks any.")

# Feature extraction (bert-tf-extract-features).
_flag(flags.DEFINE_string, "layers", "-1,-2,-3,-4", "Comma-separated transformer layers to output.")
_flag(flags.DEFINE_integer, "batch_size", 32, "Inputs per forward pass.")
_flag(flags.DEFINE_bool, "pooled", False,
      "Add sentence embeddings: 'pooled' ([CLS] through the pooler) and 'mean_pooled' (mean "
      "over the tokens of each chosen layer).")
_flag(flags.DEFINE_bool, "per_token", True,
      "Write the per-token 'features' (false: sentence embeddings only, with --pooled).")

# Checkpoint conversion (bert-tf-convert-checkpoint).
_flag(flags.DEFINE_enum, "from", None, "Format of --checkpoint.",
      enum_values=["tf1", "albert", "huggingface", "keras_hub", "bert_tf"])
_flag(flags.DEFINE_enum, "to", None, "Format to write.",
      enum_values=["bert_tf", "tf1", "albert", "huggingface"])
_flag(flags.DEFINE_string, "checkpoint", None,
      "tf1: checkpoint prefix (.../bert_model.ckpt); albert: checkpoint prefix "
      "(.../model.ckpt-best); huggingface: model directory; keras_hub: preset directory or "
      ".keras file; bert_tf: output directory of a run (the model it saved: a fine-tuning "
      "run's model.keras with its head, else pretrainer.keras, else encoder.keras) or of this "
      "tool, a .keras file or a checkpoint prefix.")
_flag(flags.DEFINE_bool, "allow_pickle", False,
      "Read a Hugging Face pytorch_model.bin (needs torch; torch.load(weights_only=True)).")
_flag(flags.DEFINE_integer, "max_position_embeddings", None,
      "Extend the learned position embeddings to this many positions (more than the "
      "checkpoint's) before writing.")
_flag(flags.DEFINE_enum, "position_extension", "copy",
      "How new position rows start: copies of the table, or the table linearly resampled "
      "(--max_position_embeddings).",
      enum_values=_Constant("bert_tf.modeling.positions", "EXTENSION_METHODS"))


# The groups the commands define.
# bert-tf-embed (sentence embeddings).
_flag(flags.DEFINE_list, "pooling", ["mean"],
      "Pooling of an encoder checkpoint: one or more of cls, max, mean, mean_sqrt_len_tokens. A "
      "sentence-transformers model or an embedding run pools as it was trained: another value "
      "given is refused.")
_flag(flags.DEFINE_bool, "normalize", True,
      "L2-normalise the vectors of an encoder checkpoint (a sentence-transformers model or an "
      "embedding run normalises as it was trained: another value given is refused).")
_flag(flags.DEFINE_string, "dev_scored_file", None,
      "Scored pairs (sentence1, sentence2, score) for the Spearman correlation.")
_flag(flags.DEFINE_string, "sentence_transformers_dir", None,
      "Where to write the sentence-transformers directory (default: "
      "output_dir/sentence_transformers; '-' to skip).")
_flag(flags.DEFINE_float, "scale", 20.0,
      "Inverse temperature of the cosine similarities in the contrastive loss.")
_flag(flags.DEFINE_bool, "symmetric_loss", False,
      "Also train positive -> anchor (the symmetric ranking loss).")

RUNTIME = ("distribution_strategy", "num_gpus", "tpu", "use_tpu", "tpu_name", "dtype",
           "jit_compile", "gradient_accumulation_steps", "seed", "steps_per_loop",
           "iterations_per_loop", "log_steps", "backend", "coordinator_address",
           "num_processes", "process_id")
MASKING = ("max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "do_whole_word_mask",
           "sentence_order_prediction", "do_span_mask", "ngram_mask", "pack_sequences",
           "max_instances_per_row")
PRETRAINING = ("bert_config_file", "vocab_file", "do_lower_case", "init_checkpoint",
               "output_dir", "input_file", "do_train", "do_eval", "eval_input_file",
               "eval_input_text_file", "train_batch_size", "eval_batch_size", "learning_rate",
               "num_train_steps", "num_warmup_steps", "save_checkpoints_steps",
               "max_eval_steps", "optimizer", "lr_schedule", "decay_proportion",
               "weight_decay_rate", "adam_bias_correction", "adam_beta1", "adam_beta2",
               "adam_epsilon", "clip_norm", "use_next_sentence_label",
               "input_text_file", "input_tfds", "tfds_data_dir", "tfds_split",
               "eval_tfds_split", "tfds_text_key", "span_boundary_objective", "full_sentences",
               "tf_data_service", "time_budget", "warmup_proportion", "objective",
               "generator_hidden_size", "discriminator_weight", "masked_lm_prob_end",
               "batch_size_ramp", "bag_of_words_weight")
FINETUNING = ("bert_config_file", "vocab_file", "do_lower_case", "init_checkpoint",
              "output_dir", "max_seq_length", "do_train", "do_eval", "do_predict",
              "allow_untrained_head",
              "train_batch_size", "eval_batch_size", "predict_batch_size", "learning_rate",
              "num_train_epochs", "warmup_proportion", "save_checkpoints_steps", "optimizer",
              "lr_schedule", "decay_proportion", "weight_decay_rate", "adam_bias_correction",
              "adam_beta1", "adam_beta2", "adam_epsilon", "clip_norm", "trainable_encoder",
              "length_buckets", "export_dir", "overwrite")
LABELED_DATA = ("data_dir", "train_file", "dev_file", "test_file", "labels")
CLASSIFICATION = ("task_name", "tfds_data_dir", "text_a_column", "text_b_column",
                  "label_column", "regression", "multi_label", "label_separator",
                  "multi_label_threshold")
TAGGING = ("token_column", "tag_column")
SQUAD_ANSWERS = ("max_query_length", "max_answer_length", "doc_stride",
                 "version_2_with_negative", "null_score_diff_threshold")
SQUAD = ("train_file", "predict_file", "n_best_size", "verbose_logging") + SQUAD_ANSWERS
CREATE_PRETRAINING_DATA = ("input_file", "output_file", "vocab_file", "do_lower_case",
                           "random_seed", "dupe_factor", "short_seq_prob", "num_workers", "gzip",
                           "feature_names", "documents_per_chunk", "shuffle_buffer_size",
                           "span_geometric_p", "max_span_length", "use_beam", "runner",
                           "beam_num_shards", "beam_pipeline_option")
BUILD_VOCAB = ("input_file", "vocab_size", "do_lower_case", "output_file", "tokenizer",
               "max_input_chars_per_word", "reserved_tokens", "max_unique_chars",
               "min_frequency")
PREPARE_DEMO_DATA = ("output_dir", "vocab_size", "do_lower_case", "max_seq_length",
                     "max_predictions_per_seq", "dupe_factor", "random_seed", "num_workers")
EXPORT = ("model_dir", "export_dir", "max_seq_length", "length_buckets", "signatures", "labels",
          "vocab_file", "do_lower_case", "text_pair", "top_k", "overwrite", "check", "format",
          "quantize", "calibration_file", "eval_file", "label_column", "multi_label_threshold")
EXTRACT_FEATURES = ("input_file", "output_file", "layers", "bert_config_file", "max_seq_length",
                    "init_checkpoint", "vocab_file", "do_lower_case", "batch_size", "pooled",
                    "per_token", "length_buckets")
EMBED = ("init_checkpoint", "vocab_file", "do_lower_case", "max_seq_length", "pooling", "normalize",
         "train_file", "dev_file", "dev_scored_file", "output_dir", "sentence_transformers_dir",
         "train_batch_size", "num_train_epochs", "learning_rate", "warmup_proportion",
         "weight_decay_rate", "scale", "symmetric_loss", "save_checkpoints_steps",
         "length_buckets", "input_file", "output_file", "batch_size", "text_a_column",
         "text_b_column", "label_column", "negative_column")
CONVERT_CHECKPOINT = ("from", "to", "checkpoint", "bert_config_file", "vocab_file",
                      "do_lower_case", "allow_pickle", "output_dir", "max_position_embeddings",
                      "position_extension", "overwrite")


def define_runtime_flags(flag_values=FLAGS):
    """Devices, distribution, precision, compilation and the loop (the training commands)."""
    define(RUNTIME, flag_values)
    return flag_values


def define_masking_flags(flag_values=FLAGS):
    """How pre-training instances are masked and packed (records and raw text alike)."""
    define(MASKING, flag_values)
    return flag_values


def define_pretraining_flags(flag_values=FLAGS):
    """bert-tf-pretrain: the original run_pretraining.py's flags plus bert_tf's additions."""
    # --warmup_proportion unset: 0.1 of a --time_budget (a step run uses --num_warmup_steps).
    define(PRETRAINING, flag_values, save_checkpoints_steps=1000, warmup_proportion=None)
    define_masking_flags(flag_values)
    define_runtime_flags(flag_values)
    return flag_values


def define_finetuning_flags(flag_values=FLAGS):
    """The flags every fine-tuning command shares (the original run_classifier.py's and more)."""
    # --do_lower_case unset (None): the tokenizer file's casing, True for a vocab.txt
    # (bert_tf.jobs.tokenizer_setup.load_tokenizer), so a cased tokenizer.json needs no flag.
    # --max_seq_length unset: the run's recorded length, else the task's default
    # (bert_tf.jobs.finetuning_config.resolve_from_run), so evaluating, predicting or
    # resuming a run needs no flag.
    # --train_batch_size unset: the run's recorded batch when resuming it, else 32 (the same).
    define(FINETUNING, flag_values, max_seq_length=None, do_lower_case=None,
           train_batch_size=None)
    define_runtime_flags(flag_values)
    return flag_values


def define_classifier_flags(flag_values=FLAGS):
    define_finetuning_flags(flag_values)
    define(LABELED_DATA + CLASSIFICATION, flag_values)
    return flag_values


def define_tagging_flags(flag_values=FLAGS):
    define_finetuning_flags(flag_values)
    define(LABELED_DATA + TAGGING, flag_values)
    return flag_values


def define_squad_flags(flag_values=FLAGS):
    define_finetuning_flags(flag_values)
    define(SQUAD, flag_values)
    return flag_values


def define_create_pretraining_data_flags(flag_values=FLAGS):
    define(CREATE_PRETRAINING_DATA, flag_values)
    define(MASKING, flag_values)
    return flag_values


def define_build_vocab_flags(flag_values=FLAGS):
    # --do_lower_case unset: true for WordPiece (uncased BERT), false for byte-level BPE.
    define(BUILD_VOCAB, flag_values, do_lower_case=None)
    return flag_values


def define_prepare_demo_data_flags(flag_values=FLAGS):
    define(PREPARE_DEMO_DATA, flag_values, output_dir="/tmp/bert_tf_demo", vocab_size=4000,
           dupe_factor=5, num_workers=2)
    return flag_values


def define_export_flags(flag_values=FLAGS):
    """bert-tf-export: unset settings come from the run, so most default to None here."""
    define(EXPORT, flag_values, max_seq_length=None, length_buckets=None, do_lower_case=None)
    define(SQUAD_ANSWERS, flag_values)
    return flag_values


def define_extract_features_flags(flag_values=FLAGS):
    # --do_lower_case unset: a tokenizer.json's casing, true for a vocab.txt.
    define(EXTRACT_FEATURES, flag_values, do_lower_case=None)
    return flag_values


def define_embed_flags(flag_values=FLAGS):
    """bert-tf-embed: contrastive fine-tuning (sentence-transformers' defaults: batch 32, one
    epoch, learning rate 2e-5) and encoding; unset model settings come from the model."""
    define(RUNTIME, flag_values)
    define(EMBED, flag_values, do_lower_case=None, max_seq_length=None, num_train_epochs=1.0,
           learning_rate=2e-5, batch_size=64)
    return flag_values


def define_convert_checkpoint_flags(flag_values=FLAGS):
    define(CONVERT_CHECKPOINT, flag_values, do_lower_case=None)
    return flag_values
