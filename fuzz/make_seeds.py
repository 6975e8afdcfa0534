#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, made from what the tree ships.

    python3 fuzz/make_seeds.py OUT_DIR

writes OUT_DIR/<target>/<name> for every target of fuzz/CMakeLists.txt:
real files where they are small (configs/, tests/config/bad/, config.json of
configs/models/, GSM8K rows), shrunk copies where they are not (the Qwen3 and
Llama-3 tokenizers keep their pre-tokenizer, normalizer, post-processor,
added tokens and chat template but only the 256 byte tokens and the merges
between them; stories260k's safetensors header with a few tensors), and
small files in the formats hpcrl writes itself (manifests, state.json).
Deterministic: the same tree gives the same seeds.
"""
import json
import os
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def put(out, target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """A valid file: {name: (dtype, shape, payload bytes)} packed in order."""
    header, blob = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(payload)]}
        blob += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def seed_safetensors(out):
    put(out, "safetensors_header", "two-tensors", safetensors(
        {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "b": ("BF16", [3], b"\x80\x3f" * 3)},
        {"format": "pt"}))
    put(out, "safetensors_header", "scalar-and-empty", safetensors(
        {"s": ("I64", [], struct.pack("<q", 7)), "e": ("F16", [0, 4], b"")}))
    raw = (ROOT / "data/stories260k/model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    keep = dict(list((k, v) for k, v in header.items() if k != "__metadata__")[:3])
    small = {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
             for k, v in keep.items()}
    put(out, "safetensors_header", "stories260k-first-tensors", safetensors(small, header.get("__metadata__")))
    put(out, "safetensors_header", "stories260k-header-only", raw[:8 + n])
    index = {"metadata": {"total_size": 48},
             "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    put(out, "safetensors_index", "two-shards.json", json.dumps(index, indent=2))
    put(out, "safetensors_index", "no-metadata.json", json.dumps({"weight_map": {"w": "model.safetensors"}}))


def seed_model_configs(out):
    for cfg in sorted((ROOT / "configs/models").glob("*/config.json")):
        put(out, "model_config", cfg.parent.name + ".json", cfg.read_bytes())
    put(out, "model_config", "stories260k.json", (ROOT / "data/stories260k/config.json").read_bytes())


def shrunk_tokenizer(directory):
    """The tokenizer with its vocabulary cut to the byte tokens and the merges among them."""
    tok = json.loads((directory / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    byte_tokens = {t: i for t, i in vocab.items() if i < 256}
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in byte_tokens and b in byte_tokens:
            merges.append(m)
        if len(merges) == 40:
            break
    kept = dict(byte_tokens)
    for m in merges:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        kept.setdefault(a + b, vocab[a + b] if a + b in vocab else len(kept))
    # Ids must be dense for the loader: renumber, then move the added tokens right after.
    order = sorted(kept, key=lambda t: kept[t])
    tok["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    tok["model"]["merges"] = merges
    base = len(order)
    for k, added in enumerate(tok.get("added_tokens", [])[:8]):
        added["id"] = base + k
    tok["added_tokens"] = tok.get("added_tokens", [])[:8]
    pp = tok.get("post_processor") or {}
    for proc in pp.get("processors", [pp]):
        for special in (proc.get("special_tokens") or {}).values():
            special["ids"] = [base]
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    names = {a["content"] for a in tok["added_tokens"]}
    small_config = {k: v for k, v in config.items() if k in ("chat_template", "add_bos_token", "add_eos_token")}
    for key in ("bos_token", "eos_token", "pad_token"):
        if isinstance(config.get(key), str) and config[key] in names:
            small_config[key] = config[key]
    return json.dumps(tok), json.dumps(small_config), config.get("chat_template")


def seed_tokenizers(out):
    texts = [p.read_text(errors="replace")[:600] for p in sorted((ROOT / "data/tokenizers/cases").glob("*.inp"))][:2]
    texts.append("<|im_start|>user\nWhat is 47+85?<|im_end|>\n<|im_start|>assistant\n")
    for name in ("qwen3", "llama3"):
        tok, config, template = shrunk_tokenizer(ROOT / "data/tokenizers" / name)
        for k, text in enumerate(texts):
            put(out, "tokenizer", f"{name}-{k}", tok + "\0" + config + "\0" + text)
        put(out, "tokenizer", f"{name}-no-config", tok + "\0\0" + texts[0])
        if isinstance(template, str):
            put(out, "chat_template", name, template + "\0system\tBe brief.\nuser\tHi\nassistant\t<think>x</think>Hello\nuser\t2+2?")


def seed_pipelines(out):
    for path in sorted(list((ROOT / "configs").glob("*.yaml")) + list((ROOT / "tests/config/bad").glob("*.yaml")) +
                       list((ROOT / "tests/e2e/data").glob("*.yaml"))):
        put(out, "pipeline_yaml", path.parent.name + "-" + path.name, path.read_bytes())
    for k, s in enumerate(["stages[0].sft.steps=7", "stages[1].grpo.clip=[0.2,0.28]", "run.seed=9",
                           "models.policy.parallel.tp=2", "placement.ranges.policy.rollout=[4,7]",
                           "stages[2]={sft: {model: policy, data: arith, steps: 2, batch: 4}}",
                           "stages.0.sft.lr=1.0e-3", "data.arith.synthetic.digits=3", "trace={chrome: false}"]):
        put(out, "set_override", f"set-{k}", s)
    put(out, "chat_template", "chatml-plain", "{% for message in messages %}<|im_start|>\0user\tHi")
    put(out, "command_reply", "score", '{"score": 1.0}')
    put(out, "command_reply", "score-index", '{"score": 0.5, "index": 3}\n')
    put(out, "command_reply", "bare", "0.25")


def seed_jsonl(out):
    rows = (ROOT / "data/gsm8k/test.jsonl").read_text().splitlines()[:3]
    put(out, "jsonl", "gsm8k-rows.jsonl", "\n".join(rows) + "\n")
    put(out, "jsonl", "prompts.jsonl", "\n".join([
        json.dumps({"prompt": "47+85="}),
        json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]}),
        json.dumps({"prompt_ids": [1, 2, 3]}), ""]) + "\n")
    put(out, "jsonl", "crlf-bom.jsonl", "\ufeff" + json.dumps({"question": "q", "answer": "work\n#### 42"}) + "\r\n\r\n")
    put(out, "jsonl", "conversations.jsonl", (ROOT / "tests/e2e/data/tool_traces.jsonl").read_text())


def seed_checkpoint_files(out):
    put(out, "checkpoint_files", "manifest.json", json.dumps({"format": "hpcrl-checkpoint-manifest", "version": 1, "files": [
        {"path": "state.json", "bytes": 120, "crc32c": "e3069283"},
        {"path": "policy/model.safetensors", "bytes": 4096, "crc32c": "0badf00d"}]}, indent=1))
    put(out, "checkpoint_files", "state.json", json.dumps({
        "step": 20, "cursor": {"epoch": 1, "index": 3, "seed": 1, "size": 64},
        "layout": {"policy": {"world": 1, "tp": 1, "sp": 1, "ep": 1, "pp": 1, "dp": 1}}, "rng": [1, 2, 3, 255]}, indent=1))
    put(out, "checkpoint_files", "complete.json", json.dumps({"steps": 40, "eval_accuracy": 0.5, "eval_loss": 1.25,
                                                              "seconds": 88.1}))


def seed_profiles(out):
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        put(out, "hardware_profile", path.name, path.read_bytes())


def main():
    out = Path(sys.argv[1])
    seed_safetensors(out)
    seed_model_configs(out)
    seed_tokenizers(out)
    seed_pipelines(out)
    seed_jsonl(out)
    seed_checkpoint_files(out)
    seed_profiles(out)


if __name__ == "__main__":
    main()
