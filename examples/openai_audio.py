"""Speech to text and text to speech with the official openai SDK.

    GATEWAY_KEY=sk-... python examples/openai_audio.py   # GATEWAY_URL defaults to http://127.0.0.1:8000
"""

import io
import math
import os
import struct
import tempfile
import wave
from pathlib import Path

from openai import OpenAI

client = OpenAI(base_url=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000") + "/v1",
                api_key=os.environ["GATEWAY_KEY"])

# Two seconds of a 440 Hz tone, as a WAV file (any mp3, mp4, mpeg, mpga, m4a, wav or webm will do).
buffer = io.BytesIO()
with wave.open(buffer, "wb") as out:
    out.setnchannels(1)
    out.setsampwidth(2)
    out.setframerate(16000)
    out.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 16000 * 2 * math.pi * 440)))
                             for i in range(32000)))
audio = ("tone.wav", buffer.getvalue(), "audio/wav")

text = client.audio.transcriptions.create(model="sim-whisper", file=audio)
print("json:", text.text)
verbose = client.audio.transcriptions.create(model="sim-whisper", file=audio, response_format="verbose_json",
                                             timestamp_granularities=["segment"], language="en")
print("verbose_json:", verbose.duration, "seconds,", len(verbose.segments or []), "segment(s)")
print("srt:", client.audio.transcriptions.create(model="sim-whisper", file=audio, response_format="srt"))

target = Path(tempfile.gettempdir()) / "gateway-speech.wav"
with client.audio.speech.with_streaming_response.create(model="sim-tts", voice="alloy", response_format="wav",
                                                        input="Hello from the gateway.") as response:
    response.stream_to_file(target)
with wave.open(str(target)) as speech:
    print("speech:", target, f"{speech.getnframes() / speech.getframerate():.2f} s")
