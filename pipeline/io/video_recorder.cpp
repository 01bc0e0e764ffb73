// The recorder of video_recorder.h. Every encoder and muxer call's result is checked, and the bytes go
// through FileSink, which sees each write's errno.
//
// What a kill, a power cut or a full disk leaves: the muxer writes a unit of the container at a time (an MP4
// fragment from frag_keyframe, an MKV cluster), and only when the packet after the unit arrives. A keyframe
// every round(fps) frames makes each unit about a second long. After each packet the unit is flushed to the
// file and, when one was written, marked complete and fdatasync'd, so the frames before the mark survive a
// power cut (measured: 11 syncs of 1 to 4 ms for 10 s of 512x512 video on ext4, against 26 ms to encode each
// frame). On a failed write the file is cut back to the mark, so what is kept ends on a whole unit and plays.
// x264 runs with tune=zerolatency: no lookahead or B-frames, so a packet leaves the encoder with its frame and
// the frames in the file are the frames handed in, less the last unit's.
#include "pipeline/io/video_recorder.h"

#include "base/error.h"
#include "build_config.h"

#if RTVD_HAS_LIBAV
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>

#include "pipeline/io/file_sink.h"
#include "pipeline/io/output_files.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}
#endif

namespace rtvd {

#if RTVD_HAS_LIBAV

namespace {

namespace fs = std::filesystem;

struct FormatFree {
  void operator()(AVFormatContext* c) const { avformat_free_context(c); }
};
struct CodecFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct ScalerFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};
struct IoFree {
  void operator()(AVIOContext* io) const {
    av_freep(&io->buffer);  // it may have been replaced by a larger one: the context's, not the one allocated
    avio_context_free(&io);
  }
};

// Options handed to an open call; what is left after the call was not recognised by this FFmpeg and is
// dropped (a tuning, not a requirement).
class Options {
 public:
  ~Options() { av_dict_free(&dict_); }
  Options& set(const char* key, const char* value) {
    if (av_dict_set(&dict_, key, value, 0) < 0) fail("out of memory for FFmpeg options");
    return *this;
  }
  AVDictionary** get() { return &dict_; }

 private:
  AVDictionary* dict_ = nullptr;
};

std::string av_error_text(int err) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, text, sizeof text);
  return text;
}

// avio_alloc_context's write callback takes a const buffer from libavformat 61 (FFmpeg 7) on.
#if defined(FF_API_AVIO_WRITE_NONCONST) && !FF_API_AVIO_WRITE_NONCONST
using WriteBuffer = const uint8_t*;
#else
using WriteBuffer = uint8_t*;
#endif

int write_to_sink(void* sink, WriteBuffer data, int bytes) {
  const int err = static_cast<FileSink*>(sink)->write(data, size_t(bytes));
  return err ? AVERROR(err) : bytes;
}

// MKV's trailer seeks back to write the segment's size, duration and index.
int64_t seek_sink(void* opaque, int64_t offset, int whence) {
  auto* sink = static_cast<FileSink*>(opaque);
  if (whence == AVSEEK_SIZE) return sink->end();
  int64_t position = 0;
  const int err = sink->seek(offset, whence & ~AVSEEK_FORCE, &position);
  return err ? AVERROR(err) : position;
}

constexpr int kIoBufferBytes = 64 << 10;

class VideoRecorder final : public Recorder {
 public:
  VideoRecorder(std::string path, int width, int height, double fps)
      : path_(std::move(path)), directory_(path_, fs::path(path_).parent_path()), width_(width), height_(height) {
    const fs::path final_path(path_);
    temp_ = (final_path.parent_path() / cat(final_path.stem().string(), ".partial", final_path.extension().string()))
                .string();
    try {
      sink_ = std::make_unique<FileSink>(path_, temp_);
    } catch (...) {
      directory_.remove_created();
      throw;
    }
    try {
      // rtvd's one-line errors say what failed; FFmpeg's own log lines would only come before them.
      av_log_set_level(AV_LOG_QUIET);
      open(fps);
    } catch (const RecordingFailed&) {
      throw;  // stop() has cleaned up
    } catch (...) {
      abandon();
      throw;
    }
  }

  ~VideoRecorder() override {
    if (!finished_ && failure_.empty()) abandon();
  }

  void write(const ImageRgba8& frame) override {
    if (!failure_.empty()) throw RecordingFailed(failure_);
    if (finished_) fail(path_, ": frame written after the recording was finished");
    check_frame_size(path_, frame, width_, height_);
    if (const int r = av_frame_make_writable(yuv_.get()); r < 0) stop("preparing a frame", r);
    const uint8_t* rgba[1] = {frame.pixels.data()};
    const int stride[1] = {width_ * 4};
    if (const int r = sws_scale(scaler_.get(), rgba, stride, 0, height_, yuv_->data, yuv_->linesize); r != height_)
      stop("converting a frame to YUV", r < 0 ? r : AVERROR_BUG);
    yuv_->pts = frames_;
    encode(yuv_.get());
    ++frames_;
  }

  void finish() override {
    if (!failure_.empty()) throw RecordingFailed(failure_);
    if (finished_) return;
    if (frames_ == 0) fail(path_, ": no frames were written");
    encode(nullptr);
    if (const int r = av_write_trailer(format_.get()); r < 0) stop("writing the end of the file", r);
    flush("writing the end of the file");
    sink_->mark_complete();
    frames_complete_ = frames_;
    if (const int err = sink_->sync(); err != 0) stop("writing the end of the file", AVERROR(err));
    release();
    // Closing lets go of the file's lock (file_sink.h): the rename follows at once.
    if (const int err = sink_->close(); err != 0) stop("closing the file", AVERROR(err));
    std::error_code ec;
    fs::rename(temp_, path_, ec);
    if (ec) {
      failure_ = cat(path_, ": cannot move the finished video into place: ", ec.message(), "; all ", frames_,
                     " frames play from ", temp_);
      throw RecordingFailed(failure_);
    }
    sync_directory();
    finished_ = true;
  }

  const std::string& path() const override { return path_; }
  const std::string& partial_path() const override { return temp_; }
  int frames_written() const override { return frames_; }
  const std::string& codec() const override { return codec_; }

 private:
  void open(double fps) {
    AVFormatContext* format = nullptr;
    if (const int r = avformat_alloc_output_context2(&format, nullptr, nullptr, path_.c_str()); r < 0)
      fail(path_, ": FFmpeg has no muxer for this file type: ", av_error_text(r));
    format_.reset(format);
    open_encoder(fps);

    stream_ = avformat_new_stream(format_.get(), nullptr);
    if (!stream_) fail(path_, ": out of memory for the video stream");
    stream_->time_base = encoder_->time_base;
    stream_->avg_frame_rate = encoder_->framerate;
    if (const int r = avcodec_parameters_from_context(stream_->codecpar, encoder_.get()); r < 0)
      fail(path_, ": cannot describe the video stream: ", av_error_text(r));

    auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
    if (!buffer) fail(path_, ": out of memory for the output buffer");
    io_.reset(avio_alloc_context(buffer, kIoBufferBytes, 1, sink_.get(), nullptr, write_to_sink, seek_sink));
    if (!io_) {
      av_free(buffer);
      fail(path_, ": out of memory for the output");
    }
    format_->pb = io_.get();
    format_->flags |= AVFMT_FLAG_CUSTOM_IO;

    Options options;
    // Fragments that start at keyframes, the first with no samples: the file plays from its start up to its
    // last complete fragment, whatever happens later.
    options.set("movflags", "+frag_keyframe+empty_moov+default_base_moof");
    // MKV starts a cluster at the first packet past the limit: half a frame short of the keyframe interval
    // starts each at a keyframe, as MP4's fragments.
    const double gop_ms = 1000.0 * (encoder_->gop_size - 0.5) * av_q2d(encoder_->time_base);
    options.set("cluster_time_limit", std::to_string(std::max(1L, std::lround(gop_ms))).c_str());
    if (const int r = avformat_write_header(format_.get(), options.get()); r < 0) stop("writing the header", r);
    flush("writing the header");
    sink_->mark_complete();

    packet_.reset(av_packet_alloc());
    yuv_.reset(av_frame_alloc());
    if (!packet_ || !yuv_) fail(path_, ": out of memory for frames");
    yuv_->format = AV_PIX_FMT_YUV420P;
    yuv_->width = width_;
    yuv_->height = height_;
    if (const int r = av_frame_get_buffer(yuv_.get(), 0); r < 0)
      fail(path_, ": out of memory for a frame: ", av_error_text(r));
    scaler_.reset(sws_getContext(width_, height_, AV_PIX_FMT_RGBA, width_, height_, AV_PIX_FMT_YUV420P,
                                 SWS_BICUBIC, nullptr, nullptr, nullptr));
    if (!scaler_) fail(path_, ": FFmpeg cannot convert RGBA to YUV 4:2:0 at ", width_, "x", height_);
  }

  // H.264 plays everywhere; MPEG-4 part 2 is what an FFmpeg without libx264 (no GPL parts) still has.
  void open_encoder(double fps) {
    const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
    codec_ = "h264";
    if (!codec) {
      codec = avcodec_find_encoder(AV_CODEC_ID_MPEG4);
      codec_ = "mpeg4";
    }
    if (!codec) fail(path_, ": this FFmpeg has neither the libx264 nor the MPEG-4 encoder");
    encoder_.reset(avcodec_alloc_context3(codec));
    if (!encoder_) fail(path_, ": out of memory for the encoder");
    const AVRational rate = av_d2q(fps, 65535);  // MPEG-4 part 2 takes time bases up to 1/65535
    encoder_->width = width_;
    encoder_->height = height_;
    encoder_->pix_fmt = AV_PIX_FMT_YUV420P;
    encoder_->framerate = rate;
    encoder_->time_base = av_inv_q(rate);
    encoder_->gop_size = std::max(1, int(std::lround(fps)));
    encoder_->max_b_frames = 0;
    encoder_->colorspace = AVCOL_SPC_SMPTE170M;  // what libswscale's RGB to YUV conversion uses
    encoder_->color_range = AVCOL_RANGE_MPEG;
    if (format_->oformat->flags & AVFMT_GLOBALHEADER) encoder_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;

    Options options;
    if (codec_ == "h264") {
      options.set("tune", "zerolatency").set("sc_threshold", "0");  // keyframes only every gop_size frames
    } else {
      encoder_->flags |= AV_CODEC_FLAG_QSCALE;  // a fixed quality: the default bit rate is too low for noise
      encoder_->global_quality = FF_QP2LAMBDA * 3;
      options.set("sc_threshold", "1000000000");
    }
    if (const int r = avcodec_open2(encoder_.get(), codec, options.get()); r < 0)
      fail(path_, ": cannot open the ", codec->name, " encoder at ", width_, "x", height_, ": ", av_error_text(r));
  }

  // frame == nullptr drains the encoder.
  void encode(const AVFrame* frame) {
    if (const int r = avcodec_send_frame(encoder_.get(), frame); r < 0) stop("encoding", r);
    for (;;) {
      const int r = avcodec_receive_packet(encoder_.get(), packet_.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) stop("encoding", r);
      mux();
    }
  }

  void mux() {
    av_packet_rescale_ts(packet_.get(), encoder_->time_base, stream_->time_base);
    packet_->stream_index = stream_->index;
    const int64_t before = sink_->end();
    const int index = packets_++;
    if (const int r = av_interleaved_write_frame(format_.get(), packet_.get()); r < 0) stop("writing", r);
    flush("writing");
    if (sink_->end() == before) return;
    // A unit reached the file: it holds every packet before this one (this one opens the next unit).
    sink_->mark_complete();
    frames_complete_ = index;
    if (const int err = sink_->sync(); err != 0) stop("writing", AVERROR(err));
  }

  void flush(const char* what) {
    avio_flush(format_->pb);
    if (format_->pb->error < 0) stop(what, format_->pb->error);
  }

  // A failed write or encode ends the recording: the file is cut back to its last complete unit and kept
  // under the partial name, which the error gives (or removed, when no frame had reached it).
  [[noreturn]] void stop(const std::string& what, int av_error) {
    const std::string cause =
        sink_->error() != 0 ? write_error_cause(sink_->error()) : cat(what, " failed: ", av_error_text(av_error));
    release();
    const int cut = sink_->cut_to_complete();
    const std::string space = free_space_text(directory_.path());
    const std::string stopped =
        frames_ == 0 ? "recording stopped before the first frame"
                     : cat("recording stopped after ", frames_, frames_ == 1 ? " frame" : " frames");
    std::string kept;
    if (frames_complete_ == 0 || cut != 0) {
      std::error_code ec;
      fs::remove(temp_, ec);
      directory_.remove_created();
      kept = cut != 0 ? cat(", what was written could not be kept: ", write_error_cause(cut))
                      : frames_ == 0 ? ": nothing was kept" : ", before a frame reached the file: nothing was kept";
    } else {
      kept = cat(": the first ", frames_complete_, " play from ", temp_);
    }
    failure_ = cat(path_, ": ", cause, space.empty() ? "" : "; " + space, "; ", stopped, kept);
    throw RecordingFailed(failure_);
  }

  // Abandoned: nothing of it is kept.
  void abandon() noexcept {
    release();
    sink_.reset();
    std::error_code ec;
    fs::remove(temp_, ec);
    directory_.remove_created();
  }

  void release() noexcept {
    scaler_.reset();
    yuv_.reset();
    packet_.reset();
    format_.reset();  // custom I/O: the context does not close or free io_
    io_.reset();
    encoder_.reset();
  }

  // The rename is durable only once the directory is: without this a power cut may bring back the partial
  // name. A failure here leaves the finished file in place, so it is not an error.
  void sync_directory() const noexcept {
    const fs::path dir = fs::path(path_).parent_path();
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

  std::string path_, temp_, codec_;
  OutputDirectory directory_;
  int width_, height_;
  std::unique_ptr<FileSink> sink_;
  std::unique_ptr<AVFormatContext, FormatFree> format_;
  std::unique_ptr<AVIOContext, IoFree> io_;
  std::unique_ptr<AVCodecContext, CodecFree> encoder_;
  std::unique_ptr<AVFrame, FrameFree> yuv_;
  std::unique_ptr<AVPacket, PacketFree> packet_;
  std::unique_ptr<SwsContext, ScalerFree> scaler_;
  AVStream* stream_ = nullptr;  // owned by format_
  int frames_ = 0;              // handed to the encoder
  int packets_ = 0;             // handed to the muxer
  int frames_complete_ = 0;     // in the file up to sink_->complete()
  bool finished_ = false;
  std::string failure_;  // the RecordingFailed message once a write failed
};

}  // namespace

std::unique_ptr<Recorder> open_video_recorder(const std::string& output, int width, int height, double fps) {
  return std::make_unique<VideoRecorder>(output, width, height, fps);
}

#else

std::unique_ptr<Recorder> open_video_recorder(const std::string& output, int, int, double) {
  fail(output, ": rtvd was built without FFmpeg's libraries, so it records PNG frames only (e.g. -o out/frames/)");
}

#endif

}  // namespace rtvd
