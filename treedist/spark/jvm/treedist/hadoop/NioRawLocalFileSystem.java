package treedist.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, setting permissions through java.nio instead of a `chmod`
 * process. Without Hadoop's native library (not shipped with PySpark), RawLocalFileSystem
 * forks `chmod` for every file and directory it creates; Spark's checkpoint writes a few
 * files per micro-batch, so every batch of every streaming query forked the driver JVM
 * (see treedist/spark/local_fs.py for what it cost).
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        short mode = permission.toShort();
        if ((mode & ~0777) != 0) {  // sticky bit and the like: only chmod sets them
            super.setPermission(p, permission);
            return;
        }
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        for (int bit = 0; bit < BITS.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                set.add(BITS[bit]);
            }
        }
        Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }
}
