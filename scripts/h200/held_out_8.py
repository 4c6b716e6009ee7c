"""The eighth held-out set's programs (fixtures/syncs/held-out-8.json): library paths no earlier set ran, harvested
after held-out-7 was scored and its misses tuned on, by scripts/h200/harvest-syncs.py held-out-8. Each program runs
its calls one by one (``_each``): a call this version's API lacks is said and skipped, the others still run."""

import os
from pathlib import Path

import torch
from harvest_each import DEVICE, _each, _updated


def hf_models_eighth() -> None:
    from transformers import (
        BigBirdConfig,
        BigBirdForMaskedLM,
        DetrConfig,
        DetrForObjectDetection,
        FunnelConfig,
        FunnelForMaskedLM,
        SwitchTransformersConfig,
        SwitchTransformersForConditionalGeneration,
        XLNetConfig,  # fmt: skip
        XLNetLMHeadModel,
    )

    ids = torch.randint(3, 300, (2, 64), device=DEVICE)

    def bigbird() -> None:
        config = BigBirdConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, attention_type="block_sparse", block_size=8, num_random_blocks=2,
                               max_position_embeddings=128)  # fmt: skip
        BigBirdForMaskedLM(config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    def xlnet() -> None:
        config = XLNetConfig(vocab_size=300, d_model=32, n_layer=1, n_head=2, d_inner=64)
        perm = torch.zeros(2, 64, 64, device=DEVICE)
        perm[:, :, -1] = 1.0
        target = torch.zeros(2, 1, 64, device=DEVICE)
        target[:, 0, -1] = 1.0
        XLNetLMHeadModel(config).to(DEVICE)(input_ids=ids, perm_mask=perm, target_mapping=target,
                                            labels=ids[:, -1:]).loss.backward()  # fmt: skip

    def switch() -> None:
        config = SwitchTransformersConfig(vocab_size=300, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                          num_decoder_layers=2, num_heads=2, num_experts=4, decoder_start_token_id=0,
                                          pad_token_id=0)  # fmt: skip
        model = SwitchTransformersForConditionalGeneration(config).to(DEVICE)
        model(input_ids=ids[:, :16], labels=ids[:, 16:24]).loss.backward()

    def detr() -> None:
        config = DetrConfig(use_timm_backbone=True, backbone="resnet18", use_pretrained_backbone=False, d_model=32,
                            encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                            encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=3)  # fmt: skip
        labels = [{"class_labels": torch.tensor([0, 2], device=DEVICE),
                   "boxes": torch.tensor([[0.5, 0.5, 0.2, 0.3], [0.3, 0.6, 0.2, 0.2]], device=DEVICE)}
                  for _ in range(2)]  # fmt: skip
        DetrForObjectDetection(config).to(DEVICE)(pixel_values=torch.rand(2, 3, 64, 64, device=DEVICE),
                                                  labels=labels).loss.backward()  # fmt: skip

    def funnel() -> None:
        config = FunnelConfig(vocab_size=300, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64)
        FunnelForMaskedLM(config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    _each(bigbird, xlnet, switch, detr, funnel)


def image_augment() -> None:
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    images = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8, device=DEVICE)
    image = images[0]
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[5, 5, 30, 40], [20, 10, 60, 50]], device=DEVICE),
                                     format="XYXY", canvas_size=(64, 64))  # fmt: skip
    labels = torch.randint(0, 5, (4,), device=DEVICE)
    _each(
        lambda: v2.RandomIoUCrop()(image, boxes),
        lambda: v2.ScaleJitter((64, 64))(image, boxes),
        lambda: v2.RandomZoomOut(p=1.0)(image, boxes),
        lambda: v2.ElasticTransform()(image),
        lambda: v2.RandAugment()(image),
        lambda: v2.TrivialAugmentWide()(image),
        lambda: v2.AutoAugment()(image),
        lambda: v2.AugMix()(image),
        lambda: v2.MixUp(num_classes=5)(images.float(), labels),
        lambda: v2.CutMix(num_classes=5)(images.float(), labels),
        lambda: v2.RandomErasing(p=1.0)(image.float()),
        lambda: v2.RandomPhotometricDistort(p=1.0)(image),
        lambda: v2.RandomEqualize(p=1.0)(image),
        lambda: v2.RandomAutocontrast(p=1.0)(image),
        lambda: v2.RandomPosterize(4, p=1.0)(image),
        lambda: v2.GaussianNoise()(image.float() / 255),
    )


def metrics_eighth() -> None:
    from torchmetrics import classification as C
    from torchmetrics import detection as D
    from torchmetrics import image as I
    from torchmetrics import retrieval as T
    from torchmetrics.functional import pairwise_cosine_similarity, pairwise_euclidean_distance

    images, other = torch.rand(2, 3, 48, 48, device=DEVICE), torch.rand(2, 3, 48, 48, device=DEVICE)
    probs, labels = torch.rand(50, device=DEVICE), torch.randint(0, 2, (50,), device=DEVICE)
    logits, classes = torch.randn(50, 4, device=DEVICE).softmax(-1), torch.randint(0, 4, (50,), device=DEVICE)
    multi, multi_labels = torch.rand(50, 3, device=DEVICE), torch.randint(0, 2, (50, 3), device=DEVICE)
    queries = torch.randint(0, 5, (50,), device=DEVICE)
    box = torch.tensor([[10.0, 10.0, 30.0, 40.0], [5.0, 5.0, 20.0, 20.0]], device=DEVICE)
    detections = [{"boxes": box, "scores": torch.tensor([0.9, 0.4], device=DEVICE),
                   "labels": torch.tensor([1, 2], device=DEVICE)}]  # fmt: skip
    truths = [{"boxes": box + 2, "labels": torch.tensor([1, 2], device=DEVICE)}]
    _each(
        lambda: _updated(I.PeakSignalNoiseRatio(), images, other),
        lambda: _updated(I.StructuralSimilarityIndexMeasure(), images, other),
        lambda: _updated(I.MultiScaleStructuralSimilarityIndexMeasure(kernel_size=3, betas=(0.5, 0.5)), images, other),
        lambda: _updated(I.TotalVariation(), images),
        lambda: _updated(I.SpectralDistortionIndex(), images, other),
        lambda: _updated(I.RelativeAverageSpectralError(), images, other),
        lambda: _updated(I.SpatialCorrelationCoefficient(), images, other),
        lambda: _updated(I.VisualInformationFidelity(), torch.rand(2, 3, 64, 64, device=DEVICE), torch.rand(2, 3, 64, 64, device=DEVICE)),
        lambda: _updated(D.IntersectionOverUnion(), detections, truths),
        lambda: _updated(D.GeneralizedIntersectionOverUnion(), detections, truths),
        lambda: _updated(D.CompleteIntersectionOverUnion(), detections, truths),
        lambda: _updated(C.MulticlassJaccardIndex(num_classes=4), logits, classes),
        lambda: _updated(C.MultilabelAveragePrecision(num_labels=3), multi, multi_labels),
        lambda: _updated(C.MulticlassStatScores(num_classes=4, top_k=2), logits, classes),
        lambda: _updated(C.BinaryGroupStatRates(num_groups=2), probs, labels, torch.randint(0, 2, (50,), device=DEVICE)),
        lambda: _updated(C.MulticlassRecallAtFixedPrecision(num_classes=4, min_precision=0.3), logits, classes),
        lambda: _updated(C.BinaryLogAUC(), probs, labels),
        lambda: _updated(T.RetrievalAUROC(), probs, labels, queries),
        lambda: _updated(T.RetrievalPrecisionRecallCurve(max_k=3), probs, labels, queries),
        lambda: _updated(T.RetrievalRecallAtFixedPrecision(min_precision=0.3), probs, labels, queries),
        lambda: pairwise_cosine_similarity(multi, multi, zero_diagonal=True),
        lambda: pairwise_euclidean_distance(multi, reduction="mean"),
    )


def graph_transforms() -> None:
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    from torch_geometric.nn import FastRGCNConv, GATConv, GINEConv, PointNetConv, RGCNConv
    from torch_geometric.nn.models import DeepGraphInfomax, GraphSAGE

    n = 40
    x, pos = torch.randn(n, 8, device=DEVICE), torch.rand(n, 3, device=DEVICE)
    edges = torch.randint(0, n, (2, 160), device=DEVICE)
    kinds = torch.randint(0, 3, (160,), device=DEVICE)
    attr = torch.randn(160, 8, device=DEVICE)

    def data() -> Data:
        return Data(x=x, pos=pos, edge_index=edges, edge_attr=attr[:, :2], num_nodes=n)

    def infomax() -> None:
        encoder = GraphSAGE(8, 16, 2).to(DEVICE)
        model = DeepGraphInfomax(16, encoder, summary=lambda z, *a, **k: z.mean(0).sigmoid(),
                                 corruption=lambda x, e: (x[torch.randperm(x.size(0), device=DEVICE)], e)).to(DEVICE)  # fmt: skip
        pos_z, neg_z, summary = model(x, edges)
        model.loss(pos_z, neg_z, summary).backward()

    _each(
        lambda: T.ToUndirected()(data()),
        lambda: T.AddSelfLoops()(data()),
        lambda: T.TwoHop()(data()),
        lambda: T.Distance()(data()),
        lambda: T.Cartesian()(data()),
        lambda: T.RemoveIsolatedNodes()(data()),
        lambda: T.LargestConnectedComponents()(data()),
        lambda: T.NormalizeScale()(data()),
        lambda: T.GCNNorm()(data()),
        lambda: T.VirtualNode()(data()),
        lambda: T.SVDFeatureReduction(4)(data()),
        lambda: T.LaplacianLambdaMax()(data()),
        lambda: GATConv(8, 8, heads=2, edge_dim=8).to(DEVICE)(x, edges, attr),
        lambda: GINEConv(torch.nn.Linear(8, 8), edge_dim=8).to(DEVICE)(x, edges, attr),
        lambda: RGCNConv(8, 8, 3).to(DEVICE)(x, edges, kinds),
        lambda: FastRGCNConv(8, 8, 3).to(DEVICE)(x, edges, kinds),
        lambda: PointNetConv(torch.nn.Linear(11, 8)).to(DEVICE)(x, pos, edges),
        infomax,
    )


def bayes_opt_eighth() -> None:
    from botorch.acquisition import qKnowledgeGradient, qMaxValueEntropy
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x = torch.rand(10, 2, device=DEVICE, dtype=torch.double)
    y = (x.sin().sum(-1, keepdim=True))
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], device=DEVICE, dtype=torch.double)
    model = SingleTaskGP(x, y, input_transform=Normalize(2), outcome_transform=Standardize(1))

    def fit() -> None:
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 3}})

    _each(
        fit,
        lambda: qKnowledgeGradient(model, num_fantasies=4)(torch.rand(2, 5, 2, device=DEVICE, dtype=torch.double)),
        lambda: qMaxValueEntropy(model, candidate_set=torch.rand(50, 2, device=DEVICE, dtype=torch.double))(
            torch.rand(3, 1, 2, device=DEVICE, dtype=torch.double)),  # fmt: skip
        lambda: optimize_acqf(qMaxValueEntropy(model, candidate_set=torch.rand(50, 2, device=DEVICE, dtype=torch.double)),
                              bounds=bounds, q=1, num_restarts=2, raw_samples=8, options={"maxiter": 2}),  # fmt: skip
    )


def lightning_tuning() -> None:
    import pytorch_lightning as pl
    from lightning.fabric import Fabric
    from pytorch_lightning.callbacks import DeviceStatsMonitor, LearningRateFinder, ModelPruning
    from pytorch_lightning.loggers import CSVLogger

    class Module(pl.LightningModule):
        def __init__(self, lr: float = 0.01) -> None:
            super().__init__()
            self.lr = lr
            self.layer = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-tuning"
    common = {"accelerator": "gpu", "devices": 1, "default_root_dir": folder, "enable_checkpointing": False,
              "enable_model_summary": False, "enable_progress_bar": False}  # fmt: skip

    def fabric_loop() -> None:
        fabric = Fabric(accelerator="cuda", devices=1, precision="bf16-mixed")
        model = torch.nn.Linear(16, 3)
        optimizer = torch.optim.AdamW(model.parameters())
        model, optimizer = fabric.setup(model, optimizer)
        for x, y in fabric.setup_dataloaders(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            fabric.backward(loss)
            fabric.clip_gradients(model, optimizer, max_norm=1.0)
            optimizer.step()
            optimizer.zero_grad()

    _each(
        lambda: pl.Trainer(max_epochs=1, logger=False, callbacks=[LearningRateFinder(num_training_steps=8)],
                           **common).fit(Module(), loader),  # fmt: skip
        lambda: pl.Trainer(max_epochs=2, logger=False, callbacks=[ModelPruning("l1_unstructured", amount=0.2)],
                           **common).fit(Module(), loader),  # fmt: skip
        lambda: pl.Trainer(max_epochs=1, logger=CSVLogger(folder), callbacks=[DeviceStatsMonitor()],
                           log_every_n_steps=2, **common).fit(Module(), loader),  # fmt: skip
        fabric_loop,
    )


def audio_transforms_eighth() -> None:
    import torchaudio
    import torchaudio.functional as F
    import torchaudio.transforms as T

    waves = torch.randn(2, 4000, device=DEVICE)
    channels = torch.randn(4, 4000, device=DEVICE)
    window = torch.hann_window(256, device=DEVICE)
    spectrum = torch.stft(channels, 256, return_complex=True, window=window)
    mask = torch.rand(spectrum.shape[-2:], device=DEVICE)
    _each(
        lambda: T.MVDR(ref_channel=0)(spectrum, mask),
        lambda: T.SoudenMVDR()(spectrum, T.PSD()(spectrum, mask), T.PSD()(spectrum, 1 - mask), 0),
        lambda: T.InverseSpectrogram(n_fft=256).to(DEVICE)(spectrum),
        lambda: T.LFCC(sample_rate=4000, n_lfcc=13, speckwargs={"n_fft": 256}).to(DEVICE)(waves),
        lambda: T.SpecAugment(n_time_masks=2, time_mask_param=10, n_freq_masks=2, freq_mask_param=8)(
            torch.randn(2, 64, 50, device=DEVICE)),  # fmt: skip
        lambda: T.Speed(4000, 1.2)(waves, torch.tensor([4000, 3000], device=DEVICE)),
        lambda: T.AddNoise()(waves, torch.randn_like(waves), torch.tensor([10.0, 5.0], device=DEVICE)),
        lambda: T.FFTConvolve()(waves, torch.randn(2, 100, device=DEVICE)),
        lambda: T.Deemphasis()(waves),
        lambda: T.AmplitudeToDB(top_db=80)(spectrum.abs()),
        lambda: F.filtfilt(waves, torch.tensor([1.0, 0.1], device=DEVICE), torch.tensor([1.0, 0.2], device=DEVICE)),
        lambda: F.mu_law_decoding(F.mu_law_encoding(waves.clamp(-1, 1), 256), 256),
        lambda: torchaudio.models.HDemucs(sources=["a", "b"], channels=8, depth=2).to(DEVICE)(torch.randn(1, 2, 4096, device=DEVICE)),
        lambda: torchaudio.models.DeepSpeech(n_feature=20, n_hidden=32, n_class=10).to(DEVICE)(torch.randn(2, 1, 30, 20, device=DEVICE)),
    )


def timm_models_eighth() -> None:
    import timm
    from timm.data import RandomErasing
    from timm.loss import AsymmetricLossMultiLabel, BinaryCrossEntropy, JsdCrossEntropy
    from timm.utils import NativeScaler

    x, y = torch.rand(4, 3, 64, 64, device=DEVICE), torch.randint(0, 5, (4,), device=DEVICE)

    def train(name: str, **kwargs) -> None:
        model = timm.create_model(name, num_classes=5, pretrained=False, **kwargs).to(DEVICE)
        optimizer = torch.optim.AdamW(model.parameters())
        scaler = NativeScaler()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())

    _each(
        lambda: train("eva02_tiny_patch14_224", img_size=64),
        lambda: train("beit_base_patch16_224", img_size=64, depth=2),
        lambda: train("levit_128s", img_size=64),
        lambda: train("mobilevit_xxs"),
        lambda: train("convnext_atto", drop_path_rate=0.1),
        lambda: train("efficientvit_b0"),
        lambda: train("vit_tiny_patch16_224", img_size=64, dynamic_img_size=True, patch_drop_rate=0.3),
        lambda: RandomErasing(probability=1.0, mode="pixel", device=DEVICE)(x.clone()),
        lambda: JsdCrossEntropy(num_splits=2)(torch.randn(8, 5, device=DEVICE), y),
        lambda: BinaryCrossEntropy(smoothing=0.1)(torch.randn(4, 5, device=DEVICE), y),
        lambda: AsymmetricLossMultiLabel()(torch.randn(4, 5, device=DEVICE), torch.randint(0, 2, (4, 5), device=DEVICE)),
    )


def embeddings_and_adapters() -> None:
    from peft import BOFTConfig, LoraConfig, VeraConfig, get_peft_model
    from sentence_transformers.util import community_detection, paraphrase_mining_embeddings
    from transformers import GPT2Config, GPT2LMHeadModel

    embeddings = torch.nn.functional.normalize(torch.randn(60, 16, device=DEVICE), dim=-1)
    embeddings[30:] = embeddings[:30] + 0.01 * torch.randn(30, 16, device=DEVICE)
    ids = torch.randint(0, 500, (4, 16), device=DEVICE)

    def base():
        return GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=500, n_positions=32))

    def mixed() -> None:
        model = get_peft_model(base(), LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
        model.add_adapter("other", LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
        model = model.to(DEVICE).eval()
        with torch.no_grad():
            model(input_ids=ids, adapter_names=["default", "other", "__base__", "default"])
        model.merge_and_unload()

    def tuned(config) -> None:
        get_peft_model(base(), config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    _each(
        lambda: community_detection(embeddings, threshold=0.9, min_community_size=2),
        lambda: paraphrase_mining_embeddings(embeddings, top_k=3),
        mixed,
        lambda: tuned(LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, use_dora=True)),
        lambda: tuned(VeraConfig(r=4, target_modules=["c_fc"], fan_in_fan_out=True)),
        lambda: tuned(BOFTConfig(boft_block_size=4, target_modules=["c_fc"], fan_in_fan_out=True)),
    )


HELD_OUT_8 = [hf_models_eighth, image_augment, metrics_eighth, graph_transforms, bayes_opt_eighth, lightning_tuning,
              audio_transforms_eighth, timm_models_eighth, embeddings_and_adapters]  # fmt: skip
