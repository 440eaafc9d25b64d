"""bert-tf-extract-features' config (ExtractFeaturesConfig) and its checks that need neither the
model nor TensorFlow; the command runs them before it loads TensorFlow (5 s on 2 CPU cores), the
job (bert_tf.jobs.extract_features) again.
"""

import dataclasses

from bert_tf.jobs import flag_checks, model_files, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError


@dataclasses.dataclass
class ExtractFeaturesConfig:
    """What a feature extraction is told; field names and defaults are the flags'
    (`bert-tf-extract-features --help`). bert_config_file and vocab_file None: the files
    beside init_checkpoint; do_lower_case None: a tokenizer.json's casing, a vocab.txt's True.
    """

    input_file: str | None = None
    output_file: str | None = None
    layers: str = "-1,-2,-3,-4"
    bert_config_file: str | None = None
    max_seq_length: int = 128
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    batch_size: int = 32
    pooled: bool = False
    per_token: bool = True
    length_buckets: str = "auto"

    def validate(self):
        """What needs neither the model nor TensorFlow (but for remote paths): the settings,
        and that the files the flags name exist. Raises FlagValueError naming the flag."""
        if self.max_seq_length < 3:
            raise FlagValueError(f"--max_seq_length={self.max_seq_length} must be at least 3 "
                                 "([CLS], a token and [SEP])")
        if self.batch_size < 1:
            raise FlagValueError(f"--batch_size={self.batch_size} must be >= 1")
        if not self.per_token and not self.pooled:
            raise FlagValueError("--noper_token leaves nothing to write without --pooled")
        model_files.check_init_checkpoint_exists(self.init_checkpoint)
        if self.bert_config_file:
            model_files.config_source(self)
        tokenizer_setup.check_vocab_file_exists(self.vocab_file)
        flag_checks.check_file("input_file", self.input_file)
