"""``kefu plan``: flags, one-line errors, and output (a report or ``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kefu.bench.slo import SloError, parse_slo
from kefu.engine.bundled import ModelLoadError, bundled_model_path
from kefu.plan import PlanError, named_number

EXIT_BAD_INPUT = 2
EXIT_NO_CARD = 1

DESCRIPTION = """\
How many cards, and which, for a model and a customer-service traffic profile: weights,
KV cache and the sequences that fit (given --gpu-memory-utilization), a roofline
estimate of decode and prefill speed on each card of a built-in table and on this CPU,
the cards needed at peak with headroom, the cheapest that meets the SLO, and whether
this machine alone would do. Every speed is an estimate; --calibrate scales it with a
real `kefu bench` run and prints how far the raw estimate was off."""

EPILOG = """\
examples:
  kefu plan --model Qwen2.5-7B-Instruct --concurrent-chats 40 --tokens-in 512 --tokens-out 150
  kefu plan --model config.json --precision int4 --daily-conversations 20000
  kefu plan --model my-model.gguf --concurrent-chats 8 --calibrate bench/summary.json
  kefu plan --model Qwen2.5-7B-Instruct --daily-conversations 20000 \
      --split Llama-3.2-1B-Instruct=0.4 --split Llama-3.2-1B-Instruct=0.3 \
      --split Llama-3.2-1B-Instruct=0.3
  kefu plan --list

Exit status: 0 a card meets the SLO, 1 none does, 2 unusable input."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``plan`` to the ``kefu`` command's subcommands."""
    plan = commands.add_parser(
        "plan",
        help="capacity planner: memory, KV cache, concurrent sequences and cards needed",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    model = plan.add_argument_group("model")
    model.add_argument(
        "--model",
        metavar="SPEC",
        help="a config.json, a .gguf file, or a built-in name (see --list); default: the "
        "bundled SmolLM2-135M GGUF that kefu serve runs",
    )
    model.add_argument(
        "--precision",
        default="bf16",
        metavar="P",
        help="weights of a config.json or built-in model: bf16, fp16, fp8, int8, int4 (AWQ/"
        "GPTQ), or a GGUF type such as q4_k, q8_0 (a .gguf file has its own; default: bf16)",
    )
    model.add_argument(
        "--kv-type",
        default="fp16",
        metavar="T",
        help="KV cache numbers: fp16, bf16, fp8, q8_0, q4_0 (default: fp16)",
    )
    model.add_argument(
        "--split",
        action="append",
        default=[],
        metavar="MODEL=SHARE",
        help="several small models against --model, one per intent (kefu's model groups), "
        "each taking SHARE of the traffic; repeat it, the shares adding up to 1 (e.g. "
        "--split Llama-3.2-1B-Instruct=0.5 --split Qwen2.5-1.5B-Instruct=0.5)",
    )
    model.add_argument("--list", action="store_true", help="list built-in models and cards")

    traffic = plan.add_argument_group("traffic (one of --daily-conversations, --concurrent-chats)")
    peak = traffic.add_mutually_exclusive_group()
    peak.add_argument("--daily-conversations", type=float, metavar="N", help="conversations a day")
    peak.add_argument(
        "--concurrent-chats",
        type=float,
        metavar="N",
        help="chats open at the same time at peak (a closed loop with --think)",
    )
    traffic.add_argument(
        "--turns", type=float, default=4.0, metavar="N", help="turns a conversation (default: 4)"
    )
    traffic.add_argument(
        "--tokens-in",
        type=int,
        default=512,
        metavar="N",
        help="prompt tokens a turn: persona, passages, history, message (default: 512)",
    )
    traffic.add_argument(
        "--tokens-out", type=int, default=150, metavar="N", help="reply tokens (default: 150)"
    )
    traffic.add_argument(
        "--peak-hour-share",
        type=float,
        default=1 / 24,
        metavar="F",
        help="share of a day's turns in its busiest hour (default: 1/24, an average hour)",
    )
    traffic.add_argument(
        "--burst",
        type=float,
        default=5.0,
        metavar="X",
        help="peak over the peak-hour rate; promotions bring 5-10x (default: 5)",
    )
    traffic.add_argument(
        "--think",
        type=float,
        default=20.0,
        metavar="S",
        help="--concurrent-chats: seconds a customer reads and types between a reply and the "
        "next message (default: 20)",
    )
    traffic.add_argument(
        "--headroom",
        type=float,
        default=0.3,
        metavar="F",
        help="share of capacity kept free at peak (default: 0.3)",
    )
    traffic.add_argument(
        "--slo",
        default="ttft=1s,tpot=100ms",
        metavar="SPEC",
        help="bounds on the estimated mean TTFT, TPOT, E2E, as kefu bench's --slo "
        "(default: ttft=1s,tpot=100ms)",
    )

    devices = plan.add_argument_group("devices and efficiency")
    devices.add_argument(
        "--cards", metavar="NAMES", help="comma-separated cards to consider (default: all)"
    )
    devices.add_argument(
        "--rent",
        action="append",
        default=[],
        metavar="NAME=USD",
        help="a card's monthly rent instead of the table's rough one (repeatable)",
    )
    devices.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        metavar="F",
        help="share of each device's memory the engine may use, as vLLM's (default: 0.9)",
    )
    devices.add_argument(
        "--activation-gib",
        type=float,
        metavar="G",
        help="activation and CUDA-graph allowance per device (default: 5 dense, 8 MoE; CPU 0.5)",
    )
    devices.add_argument(
        "--bandwidth-efficiency",
        type=float,
        default=0.7,
        metavar="F",
        help="share of peak memory bandwidth decode reaches (default: 0.7)",
    )
    devices.add_argument(
        "--compute-efficiency",
        type=float,
        default=0.5,
        metavar="F",
        help="share of peak FLOP/s prefill reaches (default: 0.5)",
    )
    devices.add_argument(
        "--cpu-bandwidth", type=float, metavar="GBS", help="this CPU's GB/s (default: measured)"
    )
    devices.add_argument(
        "--cpu-tflops",
        type=float,
        metavar="T",
        help="this CPU's TFLOP/s (default: a float32 matmul measured)",
    )
    devices.add_argument(
        "--cpu-threads", type=int, metavar="N", help="threads to measure with (default: all)"
    )

    out = plan.add_argument_group("calibration and output")
    out.add_argument(
        "--calibrate",
        type=Path,
        metavar="SUMMARY.json",
        help="a kefu bench summary.json of this model: scale the estimates by what it measured",
    )
    out.add_argument(
        "--calibrated-on",
        default="cpu",
        metavar="DEVICE",
        help="where that bench's server ran: cpu (this machine) or a card name (default: cpu)",
    )
    out.add_argument("--json", action="store_true", help="print JSON instead of the report")
    plan.set_defaults(run=run_plan)


def _error(message: str) -> int:
    print(f"kefu plan: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_plan(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (PlanError, SloError) as exc:
        return _error(str(exc))


def _rents(pairs: list[str]) -> dict[str, float]:
    usage = "NAME=USD, e.g. L20=700"
    return dict(named_number(pair, "--rent", usage, lambda usd: usd >= 0) for pair in pairs)


def _list() -> int:
    from kefu.plan.catalog import CONFIGS
    from kefu.plan.hardware import CARDS
    from kefu.plan.precision import PRECISIONS

    print("built-in models (--model NAME):")
    for name in CONFIGS:
        print(f"  {name}")
    print("cards (--cards, --rent):")
    for card in CARDS.values():
        print(
            f"  {card.name:<10} {card.memory_gib:>6g} GiB  {card.bandwidth_gbs:>5g} GB/s  "
            f"{card.tflops:>6g} TFLOP/s  ~${card.monthly_usd:,.0f}/month"
        )
    print(f"precisions (--precision): {', '.join(sorted(PRECISIONS))}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    from kefu.plan import calibrate, hardware, planner, render, render_split, split, traffic
    from kefu.plan.precision import kv_bytes
    from kefu.plan.speed import Efficiency, Speed

    spec = args.model or str(_bundled_model_path())
    model = planner.load_model(spec, args.precision)
    demand = traffic.Traffic(
        tokens_in=args.tokens_in,
        tokens_out=args.tokens_out,
        daily_conversations=args.daily_conversations,
        turns=args.turns,
        peak_hour_share=args.peak_hour_share,
        burst=args.burst,
        concurrent_chats=args.concurrent_chats,
        think_s=args.think,
        headroom=args.headroom,
    )
    slo = parse_slo(args.slo)
    options = planner.Options(
        utilization=args.gpu_memory_utilization,
        activation_gib=args.activation_gib,
        kv_type=args.kv_type,
        efficiency=Efficiency(args.bandwidth_efficiency, args.compute_efficiency),
    )
    names = [n for n in (args.cards or "").split(",") if n.strip()]
    cards = [hardware.card(n.strip()) for n in names] or list(hardware.CARDS.values())
    cards = hardware.with_rent(cards, _rents(args.rent))
    for flag, value in (("--cpu-bandwidth", args.cpu_bandwidth), ("--cpu-tflops", args.cpu_tflops)):
        if value is not None and not value > 0:
            raise PlanError(f"{flag} must be > 0, not {value:g}")
    if args.cpu_threads is not None and args.cpu_threads < 1:
        raise PlanError(f"--cpu-threads must be >= 1, not {args.cpu_threads}")
    cpu = hardware.cpu(args.cpu_bandwidth, args.cpu_tflops, args.cpu_threads)

    calibration = None
    if args.calibrate is not None:
        on = cpu if args.calibrated_on.lower() == "cpu" else hardware.card(args.calibrated_on)
        kv = model.shape.kv_values_per_token() * kv_bytes(args.kv_type)
        speed = Speed(model.shape, model.weights, kv, on, 1, options.efficiency)
        calibration = calibrate.calibrate(args.calibrate, speed, args.tokens_in)
        options = planner.Options(
            utilization=options.utilization,
            activation_gib=options.activation_gib,
            kv_type=options.kv_type,
            efficiency=calibrate.scaled(options.efficiency, calibration),
        )
    plan = planner.make_plan(model, demand, slo, options, cards, cpu)
    parts = [
        split.Part(name, share, planner.load_model(name, args.precision))
        for name, share in split.parse_split(args.split)
    ]
    rows = split.plan_split(parts, demand, slo, options, [*cards, cpu]) if parts else []
    if args.json:
        document = render.to_json(plan, calibration)
        if parts:
            document["split"] = render_split.to_json(plan, parts, rows)
        print(json.dumps(document, indent=2))
    else:
        print(render.text(plan, calibration))
        if parts:
            print("\n" + render_split.text(plan, parts, rows))
    return 0 if plan.cheapest is not None or plan.cpu.meets else EXIT_NO_CARD


def _bundled_model_path() -> Path:
    try:
        return bundled_model_path()
    except ModelLoadError as exc:
        raise PlanError(exc.message) from None
