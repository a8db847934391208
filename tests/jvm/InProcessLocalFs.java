package statelens.tests;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, doing in the JVM what it otherwise starts a process for.
 *
 * <p>Without libhadoop (not on Maven Central, so not in PySpark), RawLocalFileSystem runs
 * {@code chmod} for every file it creates and {@code readlink} for every link status (each rename of
 * a checkpoint file through FileContext asks two): about 60,000 processes a test run. These classes
 * make the same calls libhadoop would, in process; a case they do not cover (a sticky bit, a link)
 * goes to Hadoop's own code. Named by core-site.xml in the same jar (tests/jvm_archive.py).
 */
public final class InProcessLocalFs {
  private InProcessLocalFs() {}

  /** RawLocalFileSystem with chmod and the link check in process. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if ((mode & ~0777) != 0) {  // sticky and set-id bits: only chmod says them
        super.setPermission(p, permission);
        return;
      }
      Set<PosixFilePermission> perms = EnumSet.noneOf(PosixFilePermission.class);
      PosixFilePermission[] order = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
      };
      for (int bit = 0; bit < order.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          perms.add(order[bit]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), perms);
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      // Hadoop reads the link of new File(f.toString()) (a qualified path never is one) and, when
      // there is none, answers getFileStatus(f): the same test, without the process
      boolean link;
      try {
        link = Files.isSymbolicLink(new File(f.toString()).toPath());
      } catch (InvalidPathException e) {
        link = false;
      }
      return link ? super.getFileLinkStatus(f) : getFileStatus(f);
    }
  }

  /** LocalFileSystem (checksums) over {@link Raw}: fs.file.impl. */
  public static class Checksummed extends LocalFileSystem {
    public Checksummed() {
      super(new Raw());
    }
  }

  /** Hadoop's RawLocalFs over {@link Raw}. */
  public static class RawFs extends DelegateToFileSystem {
    public RawFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new Raw(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @SuppressWarnings("deprecation")
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }
  }

  /** Hadoop's LocalFs (checksums, for FileContext) over {@link RawFs}: fs.AbstractFileSystem.file.impl. */
  public static class Fs extends ChecksumFs {
    public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawFs(uri, conf));
    }
  }
}
