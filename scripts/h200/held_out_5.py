"""The fifth held-out set's programs (fixtures/syncs/held-out-5.json): library paths no earlier set ran, harvested
after held-out-4's misses were tuned on, by scripts/h200/harvest-syncs.py held-out-5. Each program runs its calls
one by one (``_each``): a call this version's API lacks is said and skipped, the others still run."""

import os
import tempfile
from pathlib import Path

import torch
from harvest_each import DEVICE, _each, _updated


def keypoints_and_box_losses() -> None:
    from torchvision.models.detection import keypointrcnn_resnet50_fpn
    from torchvision.ops import (
        complete_box_iou_loss,
        deform_conv2d,
        distance_box_iou_loss,
        drop_block2d,
        generalized_box_iou_loss,  # fmt: skip
        ps_roi_align,
        sigmoid_focal_loss,
        stochastic_depth,
    )

    model = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=2, num_keypoints=5).to(DEVICE)
    images = [torch.rand(3, 256, 256, device=DEVICE) for _ in range(2)]
    boxes = torch.tensor([[20.0, 30.0, 150.0, 200.0]], device=DEVICE)
    points = torch.tensor([[[40.0, 50.0, 1.0], [60.0, 80.0, 1.0], [90.0, 120.0, 1.0], [100.0, 150.0, 0.0],
                            [130.0, 180.0, 1.0]]], device=DEVICE)  # fmt: skip
    targets = [{"boxes": boxes, "labels": torch.tensor([1], device=DEVICE), "keypoints": points} for _ in images]
    a, b = torch.rand(50, 4, device=DEVICE) * 40, torch.rand(50, 4, device=DEVICE) * 40
    a[:, 2:] += a[:, :2] + 1
    b[:, 2:] += b[:, :2] + 1
    features = torch.rand(2, 8, 32, 32, device=DEVICE)

    def train_and_eval() -> None:
        sum(model(images, targets).values()).backward()
        model.eval()
        with torch.no_grad():
            model(images)
        model.train()

    _each(
        train_and_eval,
        lambda: sigmoid_focal_loss(
            torch.randn(50, 3, device=DEVICE), torch.rand(50, 3, device=DEVICE), reduction="mean"
        ),
        lambda: generalized_box_iou_loss(a, b, reduction="mean"),
        lambda: complete_box_iou_loss(a, b, reduction="mean"),
        lambda: distance_box_iou_loss(a, b, reduction="mean"),
        lambda: ps_roi_align(features, [a[:4], b[:4]], output_size=2),
        lambda: deform_conv2d(
            features, torch.randn(2, 18, 30, 30, device=DEVICE), torch.randn(4, 8, 3, 3, device=DEVICE)
        ),
        lambda: drop_block2d(features, p=0.2, block_size=3),
        lambda: stochastic_depth(features, p=0.2, mode="row"),
    )


def mixture_of_experts() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                           output_router_logits=True, max_position_embeddings=128)  # fmt: skip
    ids = torch.randint(1, 500, (2, 24), device=DEVICE)
    mask = torch.ones_like(ids)
    mask[1, :6] = 0

    def moe_step() -> None:
        model = MixtralForCausalLM(config).to(DEVICE)
        model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()

    def cached_decode() -> None:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=500, hidden_size=64, intermediate_size=128,
                                             num_hidden_layers=2, num_attention_heads=4,
                                             max_position_embeddings=128)).to(DEVICE).eval()  # fmt: skip
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, use_cache=True)
            cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            for _ in range(4):
                mask_now = torch.cat([mask, torch.ones_like(token)], dim=1)
                out = model(input_ids=token, attention_mask=mask_now, past_key_values=cache, use_cache=True)
                cache, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)

    _each(moe_step, cached_decode)


def speech_models() -> None:
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC, WhisperConfig, WhisperForConditionalGeneration

    def ctc() -> None:
        config = Wav2Vec2Config(vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 4), conv_kernel=(10, 8),
                                num_feat_extract_layers=2, mask_time_prob=0.2, mask_time_length=2)  # fmt: skip
        model = Wav2Vec2ForCTC(config).to(DEVICE)
        waves = torch.randn(2, 8000, device=DEVICE)
        attention = torch.ones(2, 8000, dtype=torch.long, device=DEVICE)
        attention[1, 6000:] = 0
        labels = torch.randint(1, 32, (2, 12), device=DEVICE)
        labels[1, 8:] = -100
        model(waves, attention_mask=attention, labels=labels).loss.backward()

    def whisper() -> None:
        config = WhisperConfig(vocab_size=300, d_model=64, encoder_layers=2, decoder_layers=2,
                               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
                               decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=50,
                               max_target_positions=32, decoder_start_token_id=1, pad_token_id=0)  # fmt: skip
        model = WhisperForConditionalGeneration(config).to(DEVICE)
        features = torch.randn(2, 16, 100, device=DEVICE)
        labels = torch.randint(2, 300, (2, 10), device=DEVICE)
        model(input_features=features, labels=labels).loss.backward()

    _each(ctc, whisper)


def torch_nn_paths() -> None:
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).to(DEVICE).eval()
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).to(DEVICE).eval()
    x = torch.randn(3, 10, 32, device=DEVICE)
    padding = torch.zeros(3, 10, dtype=torch.bool, device=DEVICE)
    padding[1, 7:] = True
    model = torch.nn.Linear(8, 3).to(DEVICE)
    data, y = torch.randn(16, 8, device=DEVICE), torch.randint(0, 3, (16,), device=DEVICE)

    def loss() -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(data), y)

    def scaled_step() -> None:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            value = loss()
        scaler.scale(value).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()

    def lbfgs() -> None:
        optimizer = torch.optim.LBFGS(model.parameters(), max_iter=3)

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            value = loss()
            value.backward()
            return value

        optimizer.step(closure)

    def plateau() -> None:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer).step(loss().detach())

    def ctc() -> None:
        logits = torch.randn(20, 2, 6, device=DEVICE).log_softmax(-1)
        targets = torch.randint(1, 6, (2, 5), device=DEVICE)
        lengths = torch.tensor([20, 16], device=DEVICE)
        torch.nn.CTCLoss()(logits, targets, lengths, torch.tensor([5, 3], device=DEVICE))

    def distributions() -> None:
        categorical = torch.distributions.Categorical(logits=torch.randn(8, 4, device=DEVICE), validate_args=True)
        categorical.log_prob(categorical.sample())
        normal = torch.distributions.Normal(torch.zeros(8, device=DEVICE), torch.ones(8, device=DEVICE),
                                            validate_args=True)  # fmt: skip
        normal.log_prob(normal.rsample())
        torch.distributions.kl_divergence(normal, torch.distributions.Normal(torch.ones(8, device=DEVICE), 2.0))

    _each(
        lambda: encoder(x, src_key_padding_mask=padding),
        lambda: attention(x, x, x, key_padding_mask=padding, need_weights=False),
        scaled_step,
        lbfgs,
        plateau,
        ctc,
        distributions,
        lambda: torch.nn.functional.one_hot(y),
        lambda: torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(8, 8).to(DEVICE))(data),
        lambda: torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(8, 8).to(DEVICE))(data),
        lambda: torch.nn.functional.embedding_bag(
            torch.randint(0, 10, (12,), device=DEVICE),
            torch.randn(10, 4, device=DEVICE),
            torch.tensor([0, 5, 9], device=DEVICE),
            mode="sum",
        ),  # fmt: skip
        lambda: torch.nn.utils.clip_grad_value_(model.parameters(), 0.5),
    )


def graph_layers() -> None:
    from torch_geometric.nn import (
        ASAPooling,
        DMoNPooling,
        GATv2Conv,
        MemPooling,
        PNAConv,
        TransformerConv,
        global_add_pool,  # fmt: skip
    )
    from torch_geometric.nn.aggr import SortAggregation
    from torch_geometric.utils import degree, to_dense_adj, to_dense_batch

    n = 40
    edges = torch.randint(0, n, (2, 160), device=DEVICE)
    x, batch = torch.randn(n, 8, device=DEVICE), torch.arange(n, device=DEVICE) // 10
    histogram = torch.bincount(degree(edges[1], n, dtype=torch.long))

    def pna() -> None:
        conv = PNAConv(8, 8, aggregators=["mean", "max", "std"], scalers=["identity", "amplification"],
                       deg=histogram).to(DEVICE)  # fmt: skip
        conv(x, edges)

    def dense_pools() -> None:
        dense, mask = to_dense_batch(x, batch)
        DMoNPooling([8, 8], 3).to(DEVICE)(dense, to_dense_adj(edges, batch), mask)
        MemPooling(8, 8, heads=2, num_clusters=3).to(DEVICE)(x, batch)

    _each(
        lambda: ASAPooling(8, ratio=0.5).to(DEVICE)(x, edges, batch=batch),
        pna,
        dense_pools,
        lambda: GATv2Conv(8, 8, heads=2).to(DEVICE)(x, edges, return_attention_weights=True),
        lambda: TransformerConv(8, 8, heads=2, beta=True).to(DEVICE)(x, edges),
        lambda: SortAggregation(k=4)(x, batch),
        lambda: global_add_pool(x, batch),
    )


def metrics_fifth() -> None:
    from torchmetrics.aggregation import CatMetric, MaxMetric, MeanMetric
    from torchmetrics.audio import ScaleInvariantSignalDistortionRatio, SignalNoiseRatio
    from torchmetrics.classification import (
        BinaryCalibrationError,
        MulticlassAccuracy,
        MulticlassHammingDistance,
        MultilabelRankingLoss,  # fmt: skip
    )
    from torchmetrics.nominal import CramersV
    from torchmetrics.segmentation import GeneralizedDiceScore, MeanIoU
    from torchmetrics.wrappers import BootStrapper, ClasswiseWrapper, MinMaxMetric, Running

    probs, labels = torch.rand(60, device=DEVICE), torch.randint(0, 2, (60,), device=DEVICE)
    logits, classes = torch.randn(60, 4, device=DEVICE), torch.randint(0, 4, (60,), device=DEVICE)
    masks = torch.randint(0, 3, (2, 16, 16), device=DEVICE)
    values = torch.randn(60, device=DEVICE)
    values[3] = float("nan")
    _each(
        lambda: _updated(MeanMetric(nan_strategy="warn"), values),
        lambda: _updated(MaxMetric(nan_strategy="ignore"), values),
        lambda: _updated(CatMetric(nan_strategy="ignore"), values),
        lambda: _updated(
            ScaleInvariantSignalDistortionRatio(),
            torch.randn(2, 800, device=DEVICE),
            torch.randn(2, 800, device=DEVICE),
        ),
        lambda: _updated(SignalNoiseRatio(), torch.randn(2, 800, device=DEVICE), torch.randn(2, 800, device=DEVICE)),
        lambda: _updated(BinaryCalibrationError(n_bins=10), probs, labels),
        lambda: _updated(MulticlassHammingDistance(num_classes=4), logits, classes),
        lambda: _updated(MultilabelRankingLoss(num_labels=4), logits, (logits > 0).long()),
        lambda: _updated(CramersV(num_classes=4), classes, classes.roll(3)),
        lambda: _updated(MeanIoU(num_classes=3, input_format="index"), masks, masks.roll(2, dims=1)),
        lambda: _updated(GeneralizedDiceScore(num_classes=3, input_format="index"), masks, masks.roll(2, dims=1)),
        lambda: _updated(BootStrapper(MulticlassAccuracy(num_classes=4), num_bootstraps=4), logits, classes),
        lambda: _updated(ClasswiseWrapper(MulticlassAccuracy(num_classes=4, average=None)), logits, classes),
        lambda: _updated(MinMaxMetric(MulticlassAccuracy(num_classes=4)), logits, classes),
        lambda: _updated(Running(MeanMetric(), window=3), values.nan_to_num()),
    )


def peft_tuners() -> None:
    from peft import AdaLoraConfig, IA3Config, LoHaConfig, PromptTuningConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    def base():
        return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=300, n_positions=64)).to(DEVICE)

    ids = torch.randint(1, 300, (2, 16), device=DEVICE)

    def adalora() -> None:
        config = AdaLoraConfig(target_modules=["c_attn"], init_r=4, target_r=2, tinit=0, tfinal=0, deltaT=1,
                               total_step=4, task_type="CAUSAL_LM")  # fmt: skip
        model = get_peft_model(base(), config)
        for step in range(2):
            model(input_ids=ids, labels=ids).loss.backward()
            model.base_model.update_and_allocate(step)

    def tuned(config) -> None:
        get_peft_model(base(), config)(input_ids=ids, labels=ids).loss.backward()

    _each(
        adalora,
        lambda: tuned(
            IA3Config(
                target_modules=["c_attn", "mlp.c_proj"], feedforward_modules=["mlp.c_proj"], task_type="CAUSAL_LM"
            )
        ),  # fmt: skip
        lambda: tuned(LoHaConfig(target_modules=["c_attn"], r=4, task_type="CAUSAL_LM")),
        lambda: tuned(PromptTuningConfig(num_virtual_tokens=4, task_type="CAUSAL_LM")),
    )


def sentence_losses() -> None:
    from sentence_transformers import SentenceTransformer, losses
    from transformers import BertConfig, BertModel

    folder = Path(tempfile.mkdtemp())
    BertModel(BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(folder)  # fmt: skip
    bert = BertModel.from_pretrained(folder).to(DEVICE)

    class Encoder(torch.nn.Module):  # features given as token ids: no tokenizer needed
        def forward(self, features):
            out = bert(input_ids=features["input_ids"], attention_mask=features["attention_mask"])
            return {"sentence_embedding": out.last_hidden_state.mean(1)}

    model = SentenceTransformer(modules=[Encoder()], device=DEVICE)

    def features() -> dict:
        ids = torch.randint(1, 200, (6, 12), device=DEVICE)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    pairs = torch.tensor([1, 0, 1, 0, 1, 1], device=DEVICE)
    scores = torch.rand(6, device=DEVICE)
    _each(
        lambda: losses.MultipleNegativesRankingLoss(model)([features(), features()], None).backward(),
        lambda: losses.OnlineContrastiveLoss(model)([features(), features()], pairs).backward(),
        lambda: losses.ContrastiveLoss(model)([features(), features()], pairs).backward(),
        lambda: losses.TripletLoss(model)([features(), features(), features()], None).backward(),
        lambda: losses.CoSENTLoss(model)([features(), features()], scores).backward(),
        lambda: losses.BatchHardTripletLoss(model)([features()], torch.randint(0, 3, (6,), device=DEVICE)).backward(),
        lambda: losses.MatryoshkaLoss(model, losses.MultipleNegativesRankingLoss(model), [32, 16])(
            [features(), features()], None
        ).backward(),  # fmt: skip
    )


def lightning_precision_and_swa() -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import StochasticWeightAveraging
    from torchmetrics.classification import MulticlassAccuracy

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 3)
            self.accuracy = MulticlassAccuracy(num_classes=3)

        def training_step(self, batch, _index):
            x, y = batch
            logits = self.layer(x)
            self.accuracy(logits, y)
            self.log("train_acc", self.accuracy, on_step=True, on_epoch=True)
            loss = torch.nn.functional.cross_entropy(logits, y)
            self.log_dict({"loss_max": loss, "loss_mean": loss}, on_epoch=True, reduce_fx="max")
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-swa"
    pl.Trainer(max_epochs=2, accelerator="gpu", devices=1, logger=False, default_root_dir=folder,
               precision="16-mixed", gradient_clip_val=0.5, gradient_clip_algorithm="norm", accumulate_grad_batches=2,
               callbacks=[StochasticWeightAveraging(swa_lrs=0.05, swa_epoch_start=1)], enable_checkpointing=False,
               enable_model_summary=False, enable_progress_bar=False).fit(Module(), loader)  # fmt: skip


HELD_OUT_5 = [keypoints_and_box_losses, mixture_of_experts, speech_models, torch_nn_paths, graph_layers,
              metrics_fifth, peft_tuners, sentence_losses, lightning_precision_and_swa]  # fmt: skip
