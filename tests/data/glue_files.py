"""Small GLUE task directories in the exact layouts GLUE's download script writes.

Every task has a train/dev layout and a different test layout (index column first, no label;
CoLA's train/dev have no header; MNLI's dev files carry five annotator labels before
gold_label; MRPC's header starts with a byte-order mark). The texts are made up.
"""

import os

# task -> {file name: text}
_MNLI_PARSES = "( a )\t( b )\t(ROOT (S a))\t(ROOT (S b))"
LAYOUTS = {
    "CoLA": {
        "train.tsv": "src1\t1\t\tThe dog barked at the moon.\n"
                     "src1\t0\t*\tMoon the at barked dog.\n",
        "dev.tsv": "src2\t1\t\tShe reads books.\n",
        "test.tsv": "index\tsentence\n0\tBooks she reads.\n1\tHe left early.\n",
    },
    "SST-2": {
        "train.tsv": "sentence\tlabel\na warm , funny film \t1\ntedious and \"flat\" \t0\n",
        "dev.tsv": "sentence\tlabel\nsharp writing \t1\n",
        "test.tsv": "index\tsentence\n0\ta mess of a movie .\n",
    },
    "MRPC": {
        "train.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                     "1\t11\t12\tHe said \" yes \" .\tHe answered \" yes \" .\n"
                     "0\t13\t14\tPrices rose .\tThe team won .\n",
        "dev.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                   "1\t15\t16\tIt rained .\tThere was rain .\n",
        "test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                    "0\t17\t18\tA cat sat .\tA cat sat down .\n",
    },
    "STS-B": {
        "train.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                     "sentence2\tscore\n"
                     "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA man plays.\t"
                     "A man is playing.\t4.750\n",
        "dev.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                   "sentence2\tscore\n"
                   "0\tmain-news\tnews\t2013\t0002\tnone\tnone\tStocks fell.\tIt snowed.\t0.200\n",
        "test.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                    "sentence2\n"
                    "0\tmain-forums\tforum\t2015\t0003\tnone\tnone\tA bird flies.\tA bird sings.\n",
    },
    "QQP": {
        "train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                     "7\t1\t2\tHow do I learn?\tHow can I learn?\t1\n",
        "dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                   "8\t3\t4\tWhat is rain?\tWho won?\t0\n",
        "test.tsv": "id\tquestion1\tquestion2\n0\tWhy is the sky blue?\tWhat makes the sky blue?\n",
    },
    "MNLI": {
        "train.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                     "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\t"
                     "sentence2\tlabel1\tgold_label\n"
                     f"0\t1\t1e\tfiction\t{_MNLI_PARSES}\tA man sleeps.\tA person rests.\t"
                     "entailment\tentailment\n"
                     f"1\t2\t2c\tfiction\t{_MNLI_PARSES}\tA man sleeps.\tA man runs.\t"
                     "contradiction\tcontradiction\n",
        "dev_matched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                           "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
                           "sentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\t"
                           "gold_label\n"
                           f"0\t3\t3n\tslate\t{_MNLI_PARSES}\tIt is late.\tIt is Monday.\t"
                           "neutral\tneutral\tneutral\tentailment\tneutral\tneutral\n",
        "dev_mismatched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                              "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
                              "sentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\t"
                              "gold_label\n"
                              f"0\t4\t4e\tletters\t{_MNLI_PARSES}\tWe won.\tWe did win.\t"
                              "entailment\tentailment\tentailment\tentailment\tentailment\t"
                              "entailment\n",
        "test_matched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                            "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
                            "sentence1\tsentence2\n"
                            f"0\t5\t5\tslate\t{_MNLI_PARSES}\tRain fell.\tIt was dry.\n",
        "test_mismatched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                               "sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
                               "sentence1\tsentence2\n"
                               f"0\t6\t6\tletters\t{_MNLI_PARSES}\tDear all.\tHello.\n",
    },
    "QNLI": {
        "train.tsv": "index\tquestion\tsentence\tlabel\n"
                     "0\tWho wrote it?\tIt was written by Ann.\tentailment\n",
        "dev.tsv": "index\tquestion\tsentence\tlabel\n"
                   "0\tWhen?\tThe sky is blue.\tnot_entailment\n",
        "test.tsv": "index\tquestion\tsentence\n0\tWhere?\tIn Rome.\n",
    },
    "RTE": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tAnn won.\tAnn lost.\tnot_entailment\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tBob ran.\tBob moved.\tentailment\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tIt rained.\tIt was wet.\n",
    },
    "WNLI": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tThe cup fell because it was "
                     "full.\tThe cup was full.\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tI saw him.\tHe saw me.\t0\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tShe left.\tShe went.\n",
    },
}


def write_glue(root, name):
    """Writes root/<name>/ (e.g. root/MNLI/train.tsv ...) and returns that directory."""
    directory = os.path.join(str(root), name)
    os.makedirs(directory, exist_ok=True)
    for file_name, text in LAYOUTS[name].items():
        with open(os.path.join(directory, file_name), "w", encoding="utf-8") as f:
            f.write(text)
    return directory
