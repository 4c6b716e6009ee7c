"""Harvest real syncing lines from libraries nobody on the team wrote (issue 27's corpus), on a CUDA machine.

Each program below runs a few ordinary steps of a library (torchvision detection, transformers generate,
pytorch-lightning, torch_geometric, torchaudio, timm, torchmetrics, and PyTorch's own helpers) under
nsync.testing.sync_free, which records every sync PyTorch's debug mode reports at the innermost line outside
PyTorch itself: the library's own line where the library syncs. Writes $OUT/harvest.json: per program, each
distinct line with its file (from the package's folder on), function, source, count, nsync's pattern, and the
function that holds it as written ('context', with the line's number in it: 'context_line'), which lets the
classifier read the line in its function. Run from the repository root: python scripts/h200/harvest-syncs.py
[tuning] [held-out] [held-out-2] [held-out-3] [PROGRAM...] (default: the tuning set's programs)
"""

import json
import os
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
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


harvest = {}
chosen = set(sys.argv[1:])  # program names to run (default: the tuning set's)
if "held-out" in chosen:
    chosen |= {p.__name__ for p in HELD_OUT}
if "held-out-2" in chosen:
    chosen |= {p.__name__ for p in HELD_OUT_2}
if "held-out-3" in chosen:
    chosen |= {p.__name__ for p in HELD_OUT_3}
if "tuning" in chosen:
    chosen |= {p.__name__ for p in PROGRAMS}
ALL = PROGRAMS + HELD_OUT + HELD_OUT_2 + HELD_OUT_3
for program in [p for p in ALL if (p in PROGRAMS and not chosen) or p.__name__ in chosen]:
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
    except Exception as error:  # noqa: PERF203 -- one program's failure must not lose the others'
        harvest[program.__name__] = {"error": f"{type(error).__name__}: {error}"}
        traceback.print_exc()
    # after each program: a run cut short keeps what the programs before gave
    (Path(os.environ.get("OUT", ".")) / "harvest.json").write_text(json.dumps(harvest, indent=1))
print(json.dumps({name: len(v) if isinstance(v, list) else v for name, v in harvest.items()}))
