// ffprobe as the independent reader of the videos rtvd writes: it shares no code with rtvd's recorder (it is
// FFmpeg's own command-line tool, run as a separate process), so what it counts is what a player sees.
#pragma once
#include <string>

namespace rtvd::test {

bool ffprobe_available();
// The frames ffprobe decodes from the file's first video stream, or -1 when it cannot read the file.
int ffprobe_frame_count(const std::string& path);
// ffprobe's value of a stream entry ("codec_name", "r_frame_rate", ...) of the first video stream, or "".
std::string ffprobe_stream_entry(const std::string& path, const std::string& entry);

}  // namespace rtvd::test
