"""The `align-kit` command: a config error is one line on stderr, exit 2, before torch, TRL or transformers load."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import cli_env


def test_cli_reports_a_config_error_in_one_line_before_loading_anything(cache_dir):
    code = (
        "import sys; from align_kit.cli import main\n"
        "try:\n    main(['train', 'clip=clip_higher', 'clip.eps_high=0.1'])\n"
        "finally:\n    print('heavy:', sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(cache_dir))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "align-kit: config error: clip.eps_high=0.1 is below clip.eps_low=0.2; Clip-Higher only ever raises the "
        "upper bound: set clip.eps_high >= clip.eps_low"
    )
    assert "heavy: []" in result.stdout
