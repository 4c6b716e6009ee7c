"""Harvest real syncing lines from libraries nobody on the team wrote (issue 27's corpus), on a CUDA machine.

Each program below runs a few ordinary steps of a library (torchvision detection, transformers generate,
pytorch-lightning, torch_geometric, torchaudio, timm, torchmetrics, and PyTorch's own helpers) under
nsync.testing.sync_free, which records every sync PyTorch's debug mode reports at the innermost line outside
PyTorch itself: the library's own line where the library syncs. Writes $OUT/harvest.json: per program, each
distinct line with its file (from the package's folder on), function, source, count, nsync's pattern, and the
function that holds it as written ('context', with the line's number in it: 'context_line'), which lets the
classifier read the line in its function. Run from the repository root: python scripts/h200/harvest-syncs.py
[tuning] [held-out] [held-out-2] ... [held-out-9] [PROGRAM...] (default: the tuning set's programs)
"""

import json
import os
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsync.testing import SyncFound, sync_free

DEVICE = "cuda"


def detection() -> None:
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

    model = fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=5).to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    images = [torch.rand(3, 320, 320, device=DEVICE) for _ in range(2)]
    boxes = torch.tensor([[10.0, 20.0, 120.0, 150.0], [50.0, 60.0, 200.0, 220.0]], device=DEVICE)
    targets = [{"boxes": boxes, "labels": torch.tensor([1, 3], device=DEVICE)} for _ in images]
    for _ in range(2):
        losses = model(images, targets)
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        model(images)


def generate() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128)
    model = GPT2LMHeadModel(config).to(DEVICE).eval()
    ids = torch.randint(1, 1000, (2, 8), device=DEVICE)
    mask = torch.ones_like(ids)
    model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False, pad_token_id=0)
    model.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=True, top_k=20, pad_token_id=0)


def lightning() -> None:
    import pytorch_lightning as pl

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(32, 4)

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randint(0, 4, (64,)))
    trainer = pl.Trainer(max_steps=4, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_model_summary=False, enable_progress_bar=True)  # fmt: skip
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=16))


def geometric() -> None:
    from torch_geometric.nn import GATConv, GCNConv, global_mean_pool
    from torch_geometric.utils import dropout_edge, to_dense_batch

    x = torch.randn(100, 16, device=DEVICE)
    edges = torch.randint(0, 100, (2, 400), device=DEVICE)
    batch = torch.arange(100, device=DEVICE) // 25
    gcn, gat = GCNConv(16, 16).to(DEVICE), GATConv(16, 16, heads=2).to(DEVICE)
    h = gat(gcn(x, edges).relu(), edges)
    global_mean_pool(h, batch)
    to_dense_batch(h, batch)
    dropout_edge(edges, p=0.2)


def audio() -> None:
    import torchaudio

    model = torchaudio.models.wav2vec2_base().to(DEVICE).eval()
    waves = torch.randn(2, 16000, device=DEVICE)
    lengths = torch.tensor([16000, 12000], device=DEVICE)
    with torch.no_grad():
        model(waves, lengths)
    torchaudio.transforms.MelSpectrogram().to(DEVICE)(waves)
    torchaudio.functional.resample(waves, 16000, 8000)


def timm_train() -> None:
    import timm
    from timm.optim import create_optimizer_v2
    from timm.utils import AverageMeter, accuracy, dispatch_clip_grad

    model = timm.create_model("resnet18", num_classes=10).to(DEVICE)
    optimizer = create_optimizer_v2(model, "adamw", lr=1e-3)
    meter = AverageMeter()
    x, y = torch.randn(8, 3, 64, 64, device=DEVICE), torch.randint(0, 10, (8,), device=DEVICE)
    for _ in range(2):
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        dispatch_clip_grad(model.parameters(), 1.0, mode="norm")
        optimizer.step()
        accuracy(out, y, topk=(1, 5))
        meter.update(loss.item(), x.size(0))


def metrics() -> None:
    import torchmetrics

    accuracy = torchmetrics.classification.MulticlassAccuracy(num_classes=10).to(DEVICE)
    auroc = torchmetrics.classification.MulticlassAUROC(num_classes=10).to(DEVICE)
    for _ in range(2):
        logits, y = torch.randn(32, 10, device=DEVICE), torch.randint(0, 10, (32,), device=DEVICE)
        accuracy.update(logits, y)
        auroc.update(logits.softmax(-1), y)
    accuracy.compute()
    auroc.compute()


def torch_helpers() -> None:
    model = torch.nn.LSTM(8, 16, batch_first=True).to(DEVICE)
    x = torch.randn(4, 10, 8, device=DEVICE)
    lengths = torch.tensor([10, 7, 5, 2], device=DEVICE)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True)
    model(packed)
    loss = model(x)[0].sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    torch.unique(torch.randint(0, 5, (100,), device=DEVICE))
    torch.nn.functional.cross_entropy(torch.randn(8, 5, device=DEVICE), torch.randint(0, 5, (8,), device=DEVICE))


PROGRAMS = [detection, generate, lightning, geometric, audio, timm_train, metrics, torch_helpers]


# The held-out set (fixtures/syncs/held-out.json): other code paths of these libraries and two more, harvested
# after the classifier was tuned on the set above, and scored without tuning on it.
def hf_trainer() -> None:
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    config = BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, num_labels=3)  # fmt: skip
    data = [{"input_ids": torch.randint(0, 500, (16,)), "labels": torch.tensor(i % 3)} for i in range(32)]
    args = TrainingArguments(output_dir=os.environ.get("OUT", "/tmp") + "/trainer", max_steps=4, logging_steps=1,
                             per_device_train_batch_size=8, report_to=[], save_strategy="no")  # fmt: skip
    Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=data).train()


def t5_beams() -> None:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=300, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)  # fmt: skip
    model = T5ForConditionalGeneration(config).to(DEVICE).eval()
    ids = torch.randint(2, 300, (2, 10), device=DEVICE)
    model.generate(ids, max_new_tokens=6, num_beams=2)


def one_stage_detection() -> None:
    from torchvision.models.detection import retinanet_resnet50_fpn, ssdlite320_mobilenet_v3_large

    for build in (retinanet_resnet50_fpn, ssdlite320_mobilenet_v3_large):
        model = build(weights=None, weights_backbone=None, num_classes=5).to(DEVICE)
        images = [torch.rand(3, 320, 320, device=DEVICE) for _ in range(2)]
        boxes = torch.tensor([[10.0, 20.0, 120.0, 150.0]], device=DEVICE)
        targets = [{"boxes": boxes, "labels": torch.ones(1, dtype=torch.int64, device=DEVICE)} for _ in images]
        sum(model(images, targets).values()).backward()
        model.eval()
        with torch.no_grad():
            model(images)


def geometric_more() -> None:
    from torch_geometric.nn import GATv2Conv, SAGEConv, TopKPooling, global_max_pool
    from torch_geometric.utils import k_hop_subgraph, negative_sampling, softmax, subgraph

    x = torch.randn(60, 8, device=DEVICE)
    edges = torch.randint(0, 60, (2, 200), device=DEVICE)
    batch = torch.arange(60, device=DEVICE) // 20
    h = GATv2Conv(8, 8).to(DEVICE)(SAGEConv(8, 8).to(DEVICE)(x, edges), edges)
    TopKPooling(8).to(DEVICE)(h, edges, batch=batch)
    global_max_pool(h, batch)
    softmax(h[:, 0], batch)
    negative_sampling(edges, num_nodes=60)
    subgraph(torch.arange(30, device=DEVICE), edges)
    k_hop_subgraph(3, 2, edges)


def audio_more() -> None:
    import torchaudio

    model = torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                                        depthwise_conv_kernel_size=31).to(DEVICE)  # fmt: skip
    features, lengths = torch.randn(2, 50, 80, device=DEVICE), torch.tensor([50, 30], device=DEVICE)
    model(features, lengths)
    torchaudio.transforms.TimeMasking(10).to(DEVICE)(torch.randn(1, 80, 100, device=DEVICE))
    waves = torch.randn(1, 1000, device=DEVICE)
    torchaudio.functional.lfilter(waves, torch.tensor([1.0, 0.1], device=DEVICE), torch.tensor([1.0, 0.2], device=DEVICE))


def timm_more() -> None:
    import timm
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy
    from timm.utils import ModelEmaV3

    model = timm.create_model("vit_tiny_patch16_224", num_classes=10, img_size=64, drop_path_rate=0.1).to(DEVICE)
    ema = ModelEmaV3(model)
    mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=10)
    x, y = torch.randn(8, 3, 64, 64, device=DEVICE), torch.randint(0, 10, (8,), device=DEVICE)
    x, soft = mixup(x, y)
    SoftTargetCrossEntropy()(model(x), soft).backward()
    ema.update(model)


def metrics_more() -> None:
    import torchmetrics
    from torchmetrics.detection import MeanAveragePrecision

    f1 = torchmetrics.classification.MulticlassF1Score(num_classes=5, average="macro").to(DEVICE)
    confusion = torchmetrics.classification.MulticlassConfusionMatrix(num_classes=5).to(DEVICE)
    spearman = torchmetrics.SpearmanCorrCoef().to(DEVICE)
    logits, y = torch.randn(40, 5, device=DEVICE), torch.randint(0, 5, (40,), device=DEVICE)
    f1.update(logits, y)
    confusion.update(logits, y)
    spearman.update(torch.randn(40, device=DEVICE), torch.randn(40, device=DEVICE))
    f1.compute()
    confusion.compute()
    spearman.compute()
    m_ap = MeanAveragePrecision().to(DEVICE)
    box = torch.tensor([[10.0, 10.0, 50.0, 50.0]], device=DEVICE)
    m_ap.update([{"boxes": box, "scores": torch.tensor([0.9], device=DEVICE), "labels": torch.tensor([1], device=DEVICE)}],
                [{"boxes": box, "labels": torch.tensor([1], device=DEVICE)}])  # fmt: skip
    m_ap.compute()


def lightning_more() -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 2)

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _index):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters())

    data = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randint(0, 2, (32,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    callbacks = [ModelCheckpoint(dirpath=os.environ.get("OUT", "/tmp") + "/ckpt", monitor="val_loss"),
                 EarlyStopping(monitor="val_loss")]  # fmt: skip
    pl.Trainer(max_epochs=2, accelerator="gpu", devices=1, logger=False, callbacks=callbacks,
               enable_model_summary=False, enable_progress_bar=False).fit(Module(), loader, loader)  # fmt: skip


HELD_OUT = [hf_trainer, t5_beams, one_stage_detection, geometric_more, audio_more, timm_more, metrics_more,
            lightning_more]  # fmt: skip


# A second held-out set (fixtures/syncs/held-out-2.json): libraries in neither set above (torchdiffeq, gpytorch,
# e3nn, peft) and other code paths of four more, harvested after the classifier's second tuning (on the tuning
# set with each line's function), labelled by hand before nsync's answer was looked at.
def ode() -> None:
    from torchdiffeq import odeint, odeint_adjoint

    class Field(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))

        def forward(self, t, y):
            return self.net(y)

    field = Field().to(DEVICE)
    y0, t = torch.randn(8, 4, device=DEVICE), torch.linspace(0, 1, 5, device=DEVICE)
    odeint(field, y0, t, method="dopri5").sum().backward()
    odeint_adjoint(field, y0, t, method="dopri5").sum().backward()


def gaussian_process() -> None:
    import gpytorch

    class GP(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            self.covar = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covar(x))

    x = torch.linspace(0, 1, 50, device=DEVICE)
    y = torch.sin(x * 6.28) + 0.1 * torch.randn(50, device=DEVICE)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(DEVICE)
    model = GP(x, y, likelihood).to(DEVICE)
    model.train()
    likelihood.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        (-mll(model(x), y)).backward()
        optimizer.step()
    model.eval()
    likelihood.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        likelihood(model(torch.linspace(0, 1, 20, device=DEVICE))).mean


def equivariant() -> None:
    from e3nn import o3

    irreps_in, irreps_sh, irreps_out = o3.Irreps("8x0e + 4x1o"), o3.Irreps("1x0e + 1x1o"), o3.Irreps("4x0e + 2x1o")
    product = o3.FullyConnectedTensorProduct(irreps_in, irreps_sh, irreps_out).to(DEVICE)
    x = irreps_in.randn(16, -1, device=DEVICE)
    sh = o3.spherical_harmonics(irreps_sh, torch.randn(16, 3, device=DEVICE), normalize=True)
    product(x, sh).sum().backward()
    o3.Linear(irreps_in, irreps_out).to(DEVICE)(x).sum().backward()


def lora() -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=64))
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True)).to(DEVICE)
    ids = torch.randint(0, 500, (4, 32), device=DEVICE)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()


def seq2seq_and_sampling() -> None:
    from transformers import BartConfig, BartForConditionalGeneration, LlamaConfig, LlamaForCausalLM

    bart = BartForConditionalGeneration(BartConfig(vocab_size=300, d_model=64, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=64)).to(DEVICE).eval()  # fmt: skip
    ids = torch.randint(3, 300, (2, 10), device=DEVICE)
    bart.generate(ids, max_new_tokens=6, num_beams=3, no_repeat_ngram_size=2, length_penalty=1.2)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)).to(DEVICE).eval()  # fmt: skip
    llama.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=True, top_p=0.9,
                   temperature=0.8, repetition_penalty=1.2, pad_token_id=0)  # fmt: skip


def masks_and_centers() -> None:
    from torchvision.models.detection import fcos_resnet50_fpn, maskrcnn_resnet50_fpn

    images = [torch.rand(3, 256, 256, device=DEVICE) for _ in range(2)]
    boxes = torch.tensor([[10.0, 20.0, 120.0, 150.0]], device=DEVICE)
    masks = torch.zeros(1, 256, 256, dtype=torch.uint8, device=DEVICE)
    masks[:, 20:150, 10:120] = 1
    targets = [{"boxes": boxes, "labels": torch.ones(1, dtype=torch.int64, device=DEVICE), "masks": masks}
               for _ in images]  # fmt: skip
    for build in (maskrcnn_resnet50_fpn, fcos_resnet50_fpn):
        model = build(weights=None, weights_backbone=None, num_classes=3).to(DEVICE)
        sum(model(images, targets).values()).backward()
        model.eval()
        with torch.no_grad():
            model(images)


def geometric_third() -> None:
    from torch_geometric.nn import GINConv, GraphNorm, SAGPooling, dense_diff_pool, global_add_pool
    from torch_geometric.utils import coalesce, degree, to_dense_adj, to_undirected, unbatch

    x = torch.randn(40, 8, device=DEVICE)
    edges = torch.randint(0, 40, (2, 120), device=DEVICE)
    batch = torch.arange(40, device=DEVICE) // 10
    h = GINConv(torch.nn.Linear(8, 8)).to(DEVICE)(x, edges)
    h = GraphNorm(8).to(DEVICE)(h, batch)
    SAGPooling(8).to(DEVICE)(h, edges, batch=batch)
    global_add_pool(h, batch)
    adj = to_dense_adj(edges, batch)
    dense_diff_pool(h.view(4, 10, 8), adj, torch.randn(4, 10, 3, device=DEVICE))
    unbatch(h, batch)
    degree(edges[0], num_nodes=40)
    coalesce(to_undirected(edges))


def audio_third() -> None:
    import torchaudio

    waves = torch.randn(1, 16000, device=DEVICE)
    spectrum = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_mels=40).to(DEVICE)(waves)
    torchaudio.functional.compute_deltas(spectrum)
    torchaudio.functional.spectral_centroid(waves, 16000, 0, torch.hann_window(400, device=DEVICE), 400, 200, 400)
    torchaudio.transforms.FrequencyMasking(8).to(DEVICE)(spectrum)
    torchaudio.functional.vad(waves, 16000)


HELD_OUT_2 = [ode, gaussian_process, equivariant, lora, seq2seq_and_sampling, masks_and_centers, geometric_third,
              audio_third]  # fmt: skip


# A third held-out set (fixtures/syncs/held-out-3.json, issue 43): per-batch copies, per-step reads and indices
# held in attributes, in libraries' data paths, logging and optimisation loops: accelerate, sentence-transformers,
# transformers pipelines, botorch (new), and other paths of torch_geometric, torchvision, torchmetrics, lightning.
def accelerate_loop() -> None:
    from accelerate import Accelerator

    accelerator = Accelerator()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randint(0, 4, (64,)))
    model, optimizer, loader = accelerator.prepare(model, optimizer, torch.utils.data.DataLoader(data, batch_size=16))
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.gather_for_metrics((model(x).argmax(-1), y))


def _tiny_text_model(folder: Path) -> Path:
    """A BERT of random weights and a word-level tokenizer, saved where from_pretrained reads them (no network)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(200)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")  # fmt: skip
    config = BertConfig(vocab_size=len(words), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, num_labels=3)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def text_batches() -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import pipeline

    folder = _tiny_text_model(Path(os.environ.get("OUT", "/tmp")) / "tiny-bert")
    sentences = [" ".join(f"w{(i * 7 + j) % 200}" for j in range(5 + i % 9)) for i in range(40)]
    SentenceTransformer(str(folder), device=DEVICE).encode(sentences, batch_size=8)
    pipeline("feature-extraction", model=str(folder), device=0)(sentences[:8], batch_size=4)
    pipeline("fill-mask", model=str(folder), device=0, top_k=2)(["w1 [MASK] w3", "w4 w5 [MASK]"])


def graph_batches() -> None:
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader
    from torch_geometric.nn import GCNConv, global_max_pool, global_mean_pool

    graphs = [Data(x=torch.randn(n, 8), edge_index=torch.randint(0, n, (2, 3 * n)), y=torch.tensor([n % 2]))
              for n in range(6, 22)]  # fmt: skip
    conv = GCNConv(8, 16).to(DEVICE)
    for batch in DataLoader(graphs, batch_size=4, shuffle=True):
        batch = batch.to(DEVICE)
        h = conv(batch.x, batch.edge_index)
        global_mean_pool(h, batch.batch)
        global_max_pool(h, batch.batch)
        torch.nn.functional.cross_entropy(global_mean_pool(h, batch.batch)[:, :2], batch.y).backward()


def image_logging() -> None:
    from torchvision.utils import draw_bounding_boxes, draw_keypoints, draw_segmentation_masks, make_grid

    images = torch.rand(4, 3, 64, 64, device=DEVICE)
    make_grid(images, normalize=True, scale_each=True)
    make_grid(images, normalize=True, value_range=(0.0, 1.0))
    image = (images[0] * 255).to(torch.uint8)
    boxes = torch.tensor([[5.0, 5.0, 30.0, 30.0], [10.0, 12.0, 50.0, 60.0]], device=DEVICE)
    draw_bounding_boxes(image, boxes, colors="red", width=2)
    draw_segmentation_masks(image, images[:2, 0] > 0.5, alpha=0.5)
    draw_keypoints(image, torch.tensor([[[10.0, 10.0], [20.0, 30.0]]], device=DEVICE), connectivity=[(0, 1)])


def metrics_third() -> None:
    from torchmetrics.classification import MulticlassCalibrationError
    from torchmetrics.regression import PearsonCorrCoef, R2Score, SpearmanCorrCoef
    from torchmetrics.retrieval import RetrievalMRR, RetrievalNormalizedDCG

    metrics = [RetrievalMRR(), RetrievalNormalizedDCG(top_k=3)]
    regression = [PearsonCorrCoef(), SpearmanCorrCoef(), R2Score()]
    calibration = MulticlassCalibrationError(num_classes=4)
    for metric in [*metrics, *regression, calibration]:
        metric.to(DEVICE)
    for _ in range(2):
        indexes = torch.randint(0, 4, (32,), device=DEVICE)
        scores, relevant = torch.rand(32, device=DEVICE), torch.rand(32, device=DEVICE) > 0.6
        for metric in metrics:
            metric(scores, relevant, indexes=indexes)
        y = torch.randn(32, device=DEVICE)
        for metric in regression:
            metric(y + 0.1 * torch.randn(32, device=DEVICE), y)
        calibration(torch.rand(32, 4, device=DEVICE).softmax(-1), torch.randint(0, 4, (32,), device=DEVICE))
    for metric in [*metrics, *regression, calibration]:
        metric.compute()


def bayes_opt() -> None:
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x = torch.rand(16, 2, device=DEVICE, dtype=torch.double)
    y = (x.sin().sum(-1, keepdim=True) + 0.05 * torch.randn(16, 1, device=DEVICE, dtype=torch.double))
    model = SingleTaskGP(x, y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 8}})
    bounds = torch.stack([torch.zeros(2), torch.ones(2)]).to(x)
    optimize_acqf(LogExpectedImprovement(model, best_f=y.max()), bounds=bounds, q=1, num_restarts=2,
                  raw_samples=16, options={"maxiter": 8})  # fmt: skip


def lightning_progress() -> None:
    import pytorch_lightning as pl
    from torchmetrics.classification import MulticlassAccuracy

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 3)
            self.accuracy = MulticlassAccuracy(num_classes=3)

        def training_step(self, batch, _index):
            x, y = batch
            logits = self.layer(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            self.accuracy(logits, y)
            self.log("loss", loss, prog_bar=True, on_step=True)
            self.log("accuracy", self.accuracy, prog_bar=True, on_step=True, on_epoch=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,)))
    pl.Trainer(max_epochs=1, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
               enable_model_summary=False, gradient_clip_val=1.0, log_every_n_steps=1).fit(
        Module(), torch.utils.data.DataLoader(data, batch_size=8))  # fmt: skip


HELD_OUT_3 = [accelerate_loop, text_batches, graph_batches, image_logging, metrics_third, bayes_opt,
              lightning_progress]  # fmt: skip


# A fourth held-out set (fixtures/syncs/held-out-4.json, issue 43): library paths none of the sets above ran:
# torch_geometric's utilities and transforms, sentence-transformers' search utilities, torchvision's v2
# transforms and box ops on the GPU, botorch's noisy and batch acquisition, torchmetrics' image, clustering and
# curve metrics, a variational GP in gpytorch, generate()'s logits processors, lightning Fabric and callbacks,
# and timm's training utilities. Harvested after held-out-3 was tuned on; labelled by hand before scoring.
from harvest_each import _each  # noqa: E402


def graph_utils() -> None:
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    from torch_geometric.utils import (
        add_self_loops,
        coalesce,
        degree,
        dropout_edge,
        k_hop_subgraph,
        negative_sampling,
        remove_self_loops,
        structured_negative_sampling,
        subgraph,  # fmt: skip
        to_dense_adj,
        to_dense_batch,
        to_undirected,
    )

    n = 60
    edges = coalesce(to_undirected(torch.randint(0, n, (2, 240), device=DEVICE)), num_nodes=n)
    x, batch = torch.randn(n, 8, device=DEVICE), torch.arange(n, device=DEVICE) // 12
    _each(
        lambda: negative_sampling(edges, num_nodes=n, num_neg_samples=100),
        lambda: structured_negative_sampling(edges, num_nodes=n),
        lambda: dropout_edge(edges, p=0.2),
        lambda: subgraph(torch.arange(20, device=DEVICE), edges, num_nodes=n, relabel_nodes=True),
        lambda: k_hop_subgraph(3, 2, edges, num_nodes=n, relabel_nodes=True),
        lambda: to_dense_batch(x, batch),
        lambda: to_dense_adj(edges, batch),
        lambda: add_self_loops(remove_self_loops(edges)[0], num_nodes=n),
        lambda: degree(edges[0], n),
        lambda: T.RandomLinkSplit(num_val=0.1, num_test=0.1)(Data(x=x, edge_index=edges)),
        lambda: T.RandomNodeSplit(num_val=0.2, num_test=0.2)(Data(x=x, edge_index=edges, y=batch)),
        lambda: T.Compose([T.NormalizeFeatures(), T.GCNNorm(), T.AddSelfLoops()])(Data(x=x.abs(), edge_index=edges)),
        lambda: T.LargestConnectedComponents()(Data(x=x, edge_index=edges)),
    )


def embedding_search() -> None:
    from sentence_transformers import util

    queries, corpus = torch.randn(8, 64, device=DEVICE), torch.randn(400, 64, device=DEVICE)
    unit = torch.nn.functional.normalize(corpus, dim=-1)
    _each(
        lambda: util.semantic_search(queries, corpus, top_k=5),
        lambda: util.community_detection(unit, threshold=0.2, min_community_size=3),
        lambda: util.paraphrase_mining_embeddings(unit[:120], top_k=3),
        lambda: util.cos_sim(queries, corpus),
    )


def image_transforms() -> None:
    from torchvision import tv_tensors
    from torchvision.ops import (
        batched_nms,
        box_iou,
        clip_boxes_to_image,
        masks_to_boxes,
        nms,
        remove_small_boxes,  # fmt: skip
        roi_align,
    )
    from torchvision.transforms import v2

    images, labels = torch.rand(4, 3, 96, 96, device=DEVICE), torch.randint(0, 10, (4,), device=DEVICE)
    image = tv_tensors.Image(torch.rand(3, 96, 96, device=DEVICE))
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[5.0, 5.0, 40.0, 40.0], [10.0, 10.0, 12.0, 12.0],
                                                   [50.0, 50.0, 90.0, 95.0]], device=DEVICE),
                                     format="XYXY", canvas_size=(96, 96))  # fmt: skip
    sample = {"image": image, "boxes": boxes, "labels": torch.tensor([1, 2, 3], device=DEVICE)}
    many = torch.rand(200, 4, device=DEVICE) * 50
    many[:, 2:] += many[:, :2]
    scores = torch.rand(200, device=DEVICE)
    _each(
        lambda: v2.CutMix(num_classes=10)(images, labels),
        lambda: v2.MixUp(num_classes=10)(images, labels),
        lambda: v2.Compose([v2.RandomIoUCrop(), v2.RandomHorizontalFlip(), v2.RandomResizedCrop(64),
                            v2.ClampBoundingBoxes(), v2.SanitizeBoundingBoxes(min_size=3)])(sample),  # fmt: skip
        lambda: v2.RandomZoomOut(p=1.0)(sample),
        lambda: v2.RandomErasing(p=1.0)(image),
        lambda: v2.ColorJitter(0.3, 0.3, 0.3, 0.1)(image),
        lambda: v2.RandomPhotometricDistort(p=1.0)(image),
        lambda: v2.RandAugment()(tv_tensors.Image((image * 255).to(torch.uint8))),
        lambda: v2.RandomAffine(15, translate=(0.1, 0.1))(sample),
        lambda: nms(many, scores, 0.5),
        lambda: batched_nms(many, scores, torch.randint(0, 3, (200,), device=DEVICE), 0.5),
        lambda: remove_small_boxes(many, 5.0),
        lambda: clip_boxes_to_image(many, (64, 64)),
        lambda: box_iou(many, many),
        lambda: masks_to_boxes(torch.rand(3, 32, 32, device=DEVICE) > 0.5),
        lambda: roi_align(images, [many[:5], many[5:9], many[9:12], many[12:20]], output_size=7),
    )


def bayes_opt_more() -> None:
    from botorch.acquisition import qLogNoisyExpectedImprovement, qUpperConfidenceBound
    from botorch.acquisition.utils import prune_inferior_points
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.optim import optimize_acqf
    from botorch.utils.multi_objective.pareto import is_non_dominated
    from botorch.utils.sampling import draw_sobol_samples
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x = torch.rand(20, 3, device=DEVICE, dtype=torch.double)
    y = x.cos().sum(-1, keepdim=True) + 0.05 * torch.randn(20, 1, device=DEVICE, dtype=torch.double)
    model = SingleTaskGP(x, y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 5}})
    bounds = torch.stack([torch.zeros(3), torch.ones(3)]).to(x)
    _each(
        lambda: optimize_acqf(qLogNoisyExpectedImprovement(model, X_baseline=x, prune_baseline=True), bounds=bounds,
                              q=2, num_restarts=2, raw_samples=32, options={"maxiter": 5}),  # fmt: skip
        lambda: optimize_acqf(qUpperConfidenceBound(model, beta=0.2), bounds=bounds, q=2, num_restarts=2,
                              raw_samples=32, options={"maxiter": 5}, sequential=True),  # fmt: skip
        lambda: prune_inferior_points(model, x),
        lambda: is_non_dominated(torch.randn(50, 2, device=DEVICE)),
        lambda: draw_sobol_samples(bounds, n=8, q=2),
    )


def metrics_fourth() -> None:
    from torchmetrics.classification import (
        BinaryPrecisionRecallCurve,
        BinaryROC,
        MulticlassAUROC,
        MulticlassConfusionMatrix,  # fmt: skip
        MultilabelAveragePrecision,
    )
    from torchmetrics.clustering import AdjustedRandScore, MutualInfoScore, NormalizedMutualInfoScore
    from torchmetrics.image import PeakSignalNoiseRatio, StructuralSimilarityIndexMeasure, TotalVariation

    image = [PeakSignalNoiseRatio(data_range=1.0), StructuralSimilarityIndexMeasure(data_range=1.0)]
    clustering = [MutualInfoScore(), AdjustedRandScore(), NormalizedMutualInfoScore()]
    curves = [BinaryPrecisionRecallCurve(thresholds=None), BinaryROC()]
    classes = [MulticlassAUROC(num_classes=4), MulticlassConfusionMatrix(num_classes=4)]
    labels = MultilabelAveragePrecision(num_labels=3)
    variation = TotalVariation()
    everything = [*image, *clustering, *curves, *classes, labels, variation]
    for metric in everything:
        metric.to(DEVICE)
    for _ in range(2):
        a = torch.rand(2, 3, 32, 32, device=DEVICE)
        for metric in image:
            metric(a, (a + 0.05 * torch.randn_like(a)).clamp(0, 1))
        variation(a)
        for metric in clustering:
            metric(torch.randint(0, 4, (64,), device=DEVICE), torch.randint(0, 4, (64,), device=DEVICE))
        for metric in curves:
            metric(torch.rand(64, device=DEVICE), torch.randint(0, 2, (64,), device=DEVICE))
        for metric in classes:
            metric(torch.rand(64, 4, device=DEVICE).softmax(-1), torch.randint(0, 4, (64,), device=DEVICE))
        labels(torch.rand(64, 3, device=DEVICE), torch.randint(0, 2, (64, 3), device=DEVICE))
    _each(*(metric.compute for metric in everything))


def variational_gp() -> None:
    import gpytorch

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self, inducing: torch.Tensor) -> None:
            distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
            strategy = gpytorch.variational.VariationalStrategy(self, inducing, distribution,
                                                                learn_inducing_locations=True)  # fmt: skip
            super().__init__(strategy)
            self.mean = gpytorch.means.ConstantMean()
            self.covariance = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covariance(x))

    x = torch.rand(256, 2, device=DEVICE)
    y = torch.sin(4 * x.sum(-1)) + 0.1 * torch.randn(256, device=DEVICE)
    model, likelihood = Model(x[:16].clone()).to(DEVICE), gpytorch.likelihoods.GaussianLikelihood().to(DEVICE)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=256)
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.05)
    for _ in range(3):
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    likelihood.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        likelihood(model(torch.rand(32, 2, device=DEVICE))).confidence_region()


def generate_constraints() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128)
    model = GPT2LMHeadModel(config).to(DEVICE).eval()
    ids = torch.randint(10, 1000, (2, 8), device=DEVICE)
    mask = torch.ones_like(ids)
    common = {"attention_mask": mask, "pad_token_id": 0, "max_new_tokens": 8}
    _each(
        lambda: model.generate(ids, **common, no_repeat_ngram_size=2, repetition_penalty=1.3, min_new_tokens=4,
                               eos_token_id=5, bad_words_ids=[[7], [8, 9]]),  # fmt: skip
        lambda: model.generate(ids, **common, num_beams=3, length_penalty=0.8, early_stopping=True,
                               num_return_sequences=2, no_repeat_ngram_size=3),  # fmt: skip
        lambda: model.generate(ids, **common, do_sample=True, top_p=0.9, temperature=0.7, typical_p=0.9),
        lambda: model.generate(ids, **common, do_sample=True, epsilon_cutoff=3e-4, encoder_repetition_penalty=1.1),
    )


def fabric_and_callbacks() -> None:
    import pytorch_lightning as pl
    from lightning.fabric import Fabric
    from pytorch_lightning.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger

    fabric = Fabric(accelerator="cuda", devices=1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,)))
    for x, y in fabric.setup_dataloaders(torch.utils.data.DataLoader(data, batch_size=16)):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        fabric.backward(loss)
        fabric.clip_gradients(model, optimizer, max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        fabric.all_gather(loss)

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 3)

        def training_step(self, batch, _index):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.layer(x), y)

        def validation_step(self, batch, _index):
            x, y = batch
            self.log("val_loss", torch.nn.functional.cross_entropy(self.layer(x), y), prog_bar=True)

        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1)]

    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-callbacks"
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    callbacks = [EarlyStopping(monitor="val_loss", patience=1), LearningRateMonitor(logging_interval="step"),
                 ModelCheckpoint(dirpath=folder, monitor="val_loss", save_top_k=1)]  # fmt: skip
    pl.Trainer(max_epochs=2, accelerator="gpu", devices=1, logger=CSVLogger(folder), callbacks=callbacks,
               enable_model_summary=False, enable_progress_bar=False, log_every_n_steps=1).fit(
        Module(), loader, loader)  # fmt: skip


def timm_utils() -> None:
    import timm
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy
    from timm.utils import ModelEmaV3, accuracy, dispatch_clip_grad

    model = timm.create_model("resnet18", num_classes=10).to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    ema = ModelEmaV3(model, decay=0.99)
    mix = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=10)
    for _ in range(2):
        x, y = torch.rand(8, 3, 64, 64, device=DEVICE), torch.randint(0, 10, (8,), device=DEVICE)
        mixed, soft = mix(x, y)
        loss = SoftTargetCrossEntropy()(model(mixed), soft)
        optimizer.zero_grad()
        loss.backward()
        dispatch_clip_grad(model.parameters(), 0.01, mode="agc")
        optimizer.step()
        ema.update(model)
        accuracy(model(x), y, topk=(1, 5))


HELD_OUT_4 = [graph_utils, embedding_search, image_transforms, bayes_opt_more, metrics_fourth, variational_gp,
              generate_constraints, fabric_and_callbacks, timm_utils]  # fmt: skip

CONTEXT_LINES = 400  # a function longer than this is not kept (the line alone is)


def context(path: str, line: int) -> tuple[str, int] | None:
    """The function that holds ``path``:``line``, as written (dedented), and the line's number in it."""
    import ast
    import textwrap

    try:
        text = Path(path).read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    holding = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.lineno <= line <= (n.end_lineno or n.lineno)]  # fmt: skip
    if not holding:
        return None
    function = max(holding, key=lambda n: n.lineno)  # the innermost
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    lines = text.splitlines()[first - 1 : function.end_lineno]
    if len(lines) > CONTEXT_LINES:
        return None
    return textwrap.dedent("\n".join(lines)), line - first + 1


def where(path: str) -> str:
    """The file from its package's folder on (site-packages/torchvision/ops/boxes.py -> torchvision/ops/boxes.py)."""
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    return path


from held_out_5 import HELD_OUT_5  # noqa: E402 -- the fifth set's and later sets' programs live in their own files
from held_out_6 import HELD_OUT_6  # noqa: E402
from held_out_7 import HELD_OUT_7  # noqa: E402
from held_out_8 import HELD_OUT_8  # noqa: E402
from held_out_9 import HELD_OUT_9  # noqa: E402

SETS = {"tuning": PROGRAMS, "held-out": HELD_OUT, "held-out-2": HELD_OUT_2, "held-out-3": HELD_OUT_3,
        "held-out-4": HELD_OUT_4, "held-out-5": HELD_OUT_5, "held-out-6": HELD_OUT_6,
        "held-out-7": HELD_OUT_7, "held-out-8": HELD_OUT_8, "held-out-9": HELD_OUT_9}  # fmt: skip
ALL = [program for programs in SETS.values() for program in programs]


def chosen_programs(names: list[str]) -> list:
    """The programs named, and those of each set named (default: the tuning set's)."""
    chosen = set(names) | {p.__name__ for name in names for p in SETS.get(name, [])}
    return [p for p in ALL if p.__name__ in chosen] if names else list(PROGRAMS)


def main() -> None:
    harvest = {}
    for program in chosen_programs(sys.argv[1:]):
        try:
            program()  # once outside: lazy set-up, compilation
            torch.cuda.synchronize()
            lines: dict = {}
            try:
                with sync_free():
                    program()
            except SyncFound as found:
                for sync in found.syncs:
                    key = f"{where(sync.file)}:{sync.line}"
                    entry = lines.setdefault(key, {"file": where(sync.file), "line": sync.line, "function": sync.function,
                                                   "code": sync.code, "pattern": sync.pattern, "count": 0})  # fmt: skip
                    entry["count"] += 1
                    if "context" not in entry:
                        found_context = context(sync.file, sync.line)
                        entry["context"], entry["context_line"] = found_context or (None, 0)
            harvest[program.__name__] = sorted(lines.values(), key=lambda e: -e["count"])
            print(f"{program.__name__}: {len(lines)} lines", flush=True)
        except Exception as error:
            harvest[program.__name__] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
        # after each program: a run cut short keeps what the programs before gave
        (Path(os.environ.get("OUT", ".")) / "harvest.json").write_text(json.dumps(harvest, indent=1))
    print(json.dumps({name: len(v) if isinstance(v, list) else v for name, v in harvest.items()}))


if __name__ == "__main__":
    main()
